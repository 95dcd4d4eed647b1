"""The MLP sub-layer: a dense MLP, or a mixture of experts (router, stacked experts, shared expert).

Widths come from the spec of the layer's kind: d_model -> d_ff (two input projections, gate and up,
for the gated activations swiglu, geglu and clamped_swiglu) -> d_model; each expert d_expert wide,
the shared expert d_shared.

Shapes: B batch, T length, N = B·T rows, d d_model, E experts, k experts per token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archspec.core import vocab
from archspec.reference.norms import make_norm
from archspec.spec.model import ModelSpec


def relu2(x: torch.Tensor) -> torch.Tensor:
    """Squared ReLU (So et al. 2021; Nemotron-H)."""
    return F.relu(x).square()


FUNCTIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "relu2": relu2}
# the element-wise function of each activation (of its gate, for the gated ones: archspec.core.vocab.ACTIVATIONS)
ACTIVATIONS = {name: FUNCTIONS[a.function] for name, a in vocab.ACTIVATIONS.items()}
SWIGLU_ALPHA = 1.702  # gpt-oss: sigmoid(1.702 x) x, the sigmoid approximation of GELU


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, limit: float) -> torch.Tensor:
    """gpt-oss's activation (transformers' GptOssExperts): both inputs clamped to `limit` (the gate
    from above only), then (up + 1) · gate · sigmoid(1.702 · gate)."""
    gate, up = gate.clamp(max=limit), up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * SWIGLU_ALPHA))


class Activation:
    """h(x) of the hidden layer: act(up) or, gated, act(gate) · up (clamped_swiglu: gpt-oss's)."""

    def __init__(self, spec: ModelSpec):
        self.kind, self.limit, self.act = spec.activation, spec.swiglu_limit, ACTIVATIONS[spec.activation]

    def __call__(self, up: torch.Tensor, gate: torch.Tensor | None = None) -> torch.Tensor:
        if gate is None:
            return self.act(up)
        if self.kind == "clamped_swiglu":
            return clamped_swiglu(gate, up, self.limit)
        return self.act(gate) * up


class MLP(nn.Module):
    """down(act(up(x))), or for gated kinds down(act(gate(x)) * up(x)); d_ff wide (or `d_ff`)."""

    component = "mlp"

    def __init__(self, spec: ModelSpec, d_ff: int | None = None):
        super().__init__()
        d, h, bias = spec.d_model, d_ff or spec.d_ff, spec.biases.mlp
        self.act = Activation(spec)
        self.gate = nn.Linear(d, h, bias=bias) if spec.gated else None
        self.up = nn.Linear(d, h, bias=bias)
        self.down = nn.Linear(h, d, bias=bias)

    def forward(self, x):
        return self.down(self.act(self.up(x), self.gate(x) if self.gate is not None else None))


class StackedLinear(nn.Module):
    """`copies` linear maps n_in -> n_out in one (copies, n_out, n_in) tensor (the experts)."""

    def __init__(self, copies: int, n_in: int, n_out: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(copies, n_out, n_in))
        self.bias = nn.Parameter(torch.empty(copies, n_out)) if bias else None

    def forward(self, x, e: int):
        return F.linear(x, self.weight[e], self.bias[e] if self.bias is not None else None)


class Experts(nn.Module):
    """The routed experts, each an MLP of d_expert (with the MLP's biases: gpt-oss's expert biases);
    each one runs on the tokens routed to it only."""

    component = "experts"
    role = "expert"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        E, d, h, bias = spec.mlp.experts, spec.d_model, spec.mlp.d_expert, spec.biases.mlp
        self.act = Activation(spec)
        self.gate = StackedLinear(E, d, h, bias) if spec.gated else None
        self.up = StackedLinear(E, d, h, bias)
        self.down = StackedLinear(E, h, d, bias)

    def forward(self, x, e: int | slice):
        """Expert e on the rows x (N, d) routed to it; or, for a slice of experts, each on its own rows
        x (E', rows, d) as batched matmuls (the meta device, where only shapes matter)."""
        if isinstance(e, slice):

            def lin(m, h):  # (E', rows, n_in) @ (E', n_in, n_out)
                return torch.bmm(h, m.weight[e].transpose(1, 2))

            return lin(self.down, self.act(lin(self.up, x), lin(self.gate, x) if self.gate is not None else None))
        return self.down(self.act(self.up(x, e), self.gate(x, e) if self.gate is not None else None), e)


class Router(nn.Linear):
    component = "router"
    role = "router"


class SharedExpert(MLP):
    component = "shared_experts"
    role = "shared_expert"


class SharedGate(nn.Linear):
    component = "shared_experts"
    role = "shared_expert"


class MoE(nn.Module):
    """A router scores the experts per token — softmax over them, or a sigmoid each (DeepSeek-V3) —
    and picks the top_k, by the scores plus a learned per-expert correction where there is one
    (`router_correction`, ERNIE 4.5); the weights are the chosen scores without the correction,
    renormalised over the top k when `normalize`, times `routed_scale` (transformers'
    DeepseekV3TopkRouter, without its expert groups). The experts' outputs are summed with those
    weights (with `weight_input`, Llama 4's: each weight scales the expert's input instead, and the
    outputs are summed as they are), beside the shared expert (gated by sigmoid(shared_gate(x)) where there is one).

    Gemma 4's options (transformers' Gemma4TextRouter and Gemma4TextDecoderLayer): `router_norm`,
    the router reads rms_norm(x) (no weight) · router_scale · d_model^-0.5; `expert_scales`, each
    routing weight times expert_scale of its expert; `d_dense`, a dense MLP (`dense`) on the
    block's normalised input beside the experts, which read experts_norm(residual), the router the
    residual itself: dense_post_norm(dense(x)) + experts_post_norm(experts(...))."""

    # the MoE's own parameters (the correction, Gemma 4's scales) are the router's
    parameter_components = {"router_correction": "router", "router_scale": "router", "expert_scale": "router"}
    parameter_roles = {"router_correction": "router", "router_scale": "router", "expert_scale": "router"}

    def __init__(self, spec: ModelSpec):
        super().__init__()
        moe, d = spec.mlp, spec.d_model
        self.top_k, self.normalize, self.scoring = moe.top_k, moe.normalize, moe.scoring
        self.routed_scale, self.weight_input = moe.routed_scale, moe.weight_input
        self.router = Router(d, moe.experts, bias=moe.router_bias)
        self.router_correction = nn.Parameter(torch.empty(moe.experts)) if moe.correction_bias else None
        self.experts = Experts(spec)
        self.shared = SharedExpert(spec, moe.d_shared) if moe.d_shared else None
        self.shared_gate = SharedGate(d, 1, bias=False) if moe.shared_gate else None
        self.eps = spec.norm_eps
        self.router_scale = nn.Parameter(torch.empty(d)) if moe.router_norm else None
        self.expert_scale = nn.Parameter(torch.empty(moe.experts)) if moe.expert_scales else None
        self.dense = MLP(spec, moe.d_dense) if moe.d_dense else None
        self.dense_post_norm = make_norm(spec) if moe.d_dense else None
        self.experts_norm = make_norm(spec) if moe.d_dense else None
        self.experts_post_norm = make_norm(spec) if moe.d_dense else None

    def router_input(self, flat):
        """What the router reads: rms_norm(x) · router_scale · d_model^-0.5 with router_norm, else x."""
        if self.router_scale is None:
            return flat
        d = flat.shape[-1]
        return F.rms_norm(flat, (d,), eps=self.eps) * self.router_scale * d**-0.5

    def route(self, flat):
        """(N, d), what the router reads -> the routing weights (N, k) and the chosen experts (N, k)."""
        logits = self.router(self.router_input(flat)).float()  # (N, E)
        scores = logits.sigmoid() if self.scoring == "sigmoid" else logits.softmax(dim=-1)
        choice = scores + self.router_correction.float() if self.router_correction is not None else scores
        chosen = choice.topk(self.top_k, dim=-1).indices  # (N, k)
        weights = scores.gather(1, chosen)
        if self.normalize:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + (1e-20 if self.scoring == "sigmoid" else 0))
        if self.expert_scale is not None:
            weights = weights * self.expert_scale.float()[chosen]
        return weights * self.routed_scale if self.routed_scale != 1 else weights, chosen

    def forward(self, x, residual=None):
        """x (B, T, d): the block's normalised input; `residual`, the block's input, which with a
        dense MLP beside the experts (d_dense) the router and the experts' norm read."""
        if self.dense is None:
            return self._experts_forward(x)
        routed = self.experts_post_norm(self._experts_forward(self.experts_norm(residual), residual))
        return self.dense_post_norm(self.dense(x)) + routed

    def _experts_forward(self, x, router_x=None):
        """The router (on `router_x`, or x), the routed and the shared experts on x."""
        B, T, d = x.shape
        flat = x.reshape(B * T, d)  # (N, d)
        if flat.is_meta:  # shapes only: no values to route by, so spread the N·k routed rows evenly
            return self._meta_forward(flat).view(B, T, d)
        weights, chosen = self.route(flat if router_x is None else router_x.reshape(B * T, d))
        out = torch.zeros_like(flat)
        for e in range(self.router.out_features):  # each expert on the tokens routed to it
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel():
                w = weights[rows, slot, None].to(flat.dtype)
                y = self.experts(flat[rows] * w, e) if self.weight_input else self.experts(flat[rows], e) * w
                out = out.index_add(0, rows, y)
        if self.shared is not None:
            shared = self.shared(flat)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(flat)) * shared
            out = out + shared
        return out.view(B, T, d)

    def _meta_forward(self, flat):
        """On the meta device: the same modules on the same number of rows (N·k routed rows in all,
        which is what the FLOPs depend on), expert e taking N·k // E of them (one more for the first
        N·k mod E experts)."""
        E, routed = self.router.out_features, flat.shape[0] * self.top_k
        self.router(self.router_input(flat))
        out = torch.zeros_like(flat)
        q, extra = divmod(routed, E)
        for rows, experts in ((q + 1, slice(0, extra)), (q, slice(extra, E))):
            if rows and experts.stop > experts.start:
                self.experts(flat.new_empty(experts.stop - experts.start, rows, flat.shape[1]), experts)
        if self.shared is not None:
            shared = self.shared(flat)
            out = out + (torch.sigmoid(self.shared_gate(flat)) * shared if self.shared_gate is not None else shared)
        return out
