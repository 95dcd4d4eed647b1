"""The MLP sub-layer: a dense MLP, or a mixture of experts (router, stacked experts, shared expert).

Shapes: B batch, T length, N = B·T rows, d d_model, E experts, k experts per token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archspec.blocks import MLPShape
from archspec.spec import ModelSpec

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class MLP(nn.Module):
    """down(act(up(x))), or for gated kinds down(act(gate(x)) * up(x))."""

    component = "mlp"

    def __init__(self, m: MLPShape):
        super().__init__()
        self.act = ACTIVATIONS[m.pointwise]
        self.gate = nn.Linear(m.d_model, m.d_ff, bias=m.bias) if "gate" in m.inputs else None
        self.up = nn.Linear(m.d_model, m.d_ff, bias=m.bias)
        self.down = nn.Linear(m.d_ff, m.d_model, bias=m.bias)

    def forward(self, x):
        h = self.act(self.gate(x)) * self.up(x) if self.gate is not None else self.act(self.up(x))
        return self.down(h)


class StackedLinear(nn.Module):
    """`copies` linear maps n_in -> n_out in one (copies, n_out, n_in) tensor (the experts)."""

    def __init__(self, copies: int, n_in: int, n_out: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(copies, n_out, n_in))
        self.bias = nn.Parameter(torch.empty(copies, n_out)) if bias else None

    def forward(self, x, e: int):
        return F.linear(x, self.weight[e], self.bias[e] if self.bias is not None else None)


class Experts(nn.Module):
    """The routed experts, each an MLP of d_expert; each one runs on the tokens routed to it only."""

    component = "experts"
    role = "expert"

    def __init__(self, m: MLPShape, experts: int):
        super().__init__()
        self.act = ACTIVATIONS[m.pointwise]
        self.gate = StackedLinear(experts, m.d_model, m.d_ff, m.bias) if "gate" in m.inputs else None
        self.up = StackedLinear(experts, m.d_model, m.d_ff, m.bias)
        self.down = StackedLinear(experts, m.d_ff, m.d_model, m.bias)

    def forward(self, x, e: int | slice):
        """Expert e on the rows x (N, d) routed to it; or, for a slice of experts, each on its own rows
        x (E', rows, d) as batched matmuls (the meta device, where only shapes matter)."""
        if isinstance(e, slice):

            def lin(m, h):  # (E', rows, n_in) @ (E', n_in, n_out)
                return torch.bmm(h, m.weight[e].transpose(1, 2))

            h = self.act(lin(self.gate, x)) * lin(self.up, x) if self.gate is not None else self.act(lin(self.up, x))
            return lin(self.down, h)
        h = self.act(self.gate(x, e)) * self.up(x, e) if self.gate is not None else self.act(self.up(x, e))
        return self.down(h, e)


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
    """A router picks top_k experts per token (softmax over the experts, renormalised over the
    top k when `normalize`); their outputs are summed with those weights, beside the shared expert
    (gated by sigmoid(shared_gate(x)) where there is one)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        moe = spec.mlp
        self.top_k, self.normalize = moe.top_k, moe.normalize
        self.router = Router(spec.d_model, moe.experts, bias=moe.router_bias)
        self.experts = Experts(MLPShape.of(spec, moe.d_expert), moe.experts)
        self.shared = SharedExpert(MLPShape.of(spec, moe.d_shared)) if moe.d_shared else None
        self.shared_gate = SharedGate(spec.d_model, 1, bias=False) if moe.shared_gate else None

    def forward(self, x):
        B, T, d = x.shape
        flat = x.reshape(B * T, d)  # (N, d)
        if flat.is_meta:  # shapes only: no values to route by, so spread the N·k routed rows evenly
            return self._meta_forward(flat).view(B, T, d)
        probs = self.router(flat).float().softmax(dim=-1)  # (N, E)
        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, k)
        if self.normalize:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(flat)
        for e in range(self.router.out_features):  # each expert on the tokens routed to it
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel():
                y = self.experts(flat[rows], e) * weights[rows, slot, None].to(flat.dtype)
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
        self.router(flat)
        out = torch.zeros_like(flat)
        q, extra = divmod(routed, E)
        for rows, experts in ((q + 1, slice(0, extra)), (q, slice(extra, E))):
            if rows and experts.stop > experts.start:
                self.experts(flat.new_empty(experts.stop - experts.start, rows, flat.shape[1]), experts)
        if self.shared is not None:
            shared = self.shared(flat)
            out = out + (torch.sigmoid(self.shared_gate(flat)) * shared if self.shared_gate is not None else shared)
        return out
