"""The recurrent mixers of the reference model, written from the papers and the spec's fields.

Mamba (Gu and Dao 2023; Jamba's variant with RMSNorms on dt, B and C), Mamba-2 (Dao and Gu 2024)
and Gated DeltaNet (Yang et al. 2025, as Qwen3-Next and Qwen3.5 run it). Every width comes from
the spec's own fields here, never from the analytic description (archspec.describe.blocks, archspec.describe.mixers):
the test that holds the two equal tensor by tensor then proves the widths.

Each module takes x (B, T, d) and returns (B, T, d). With ``cache`` a dict, the module decodes
incrementally: ``cache["conv"]`` holds the conv's last d_conv inputs (B, C, d_conv) in the input's
dtype, ``cache["state"]`` the recurrent state in fp32, as transformers' cache holds them; a first
call fills the dict, later calls continue from it, any number of tokens at a time.

The scans are plain sequential recurrences of element-wise operations (no matmul inside), so
FlopCounterMode counts the projections and the conv only; their numerics follow transformers'
PyTorch paths (the chunked forms are the same recurrence, regrouped). Shapes: B batch, T tokens,
d d_model, I inner width, N state size, H heads, P head width, G groups, C conv channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from archspec.spec.model import ModelSpec


class GatedRMSNorm(nn.Module):
    """RMSNorm in fp32 over groups of the last dimension; with a gate, silu(gate) multiplies the
    input before the norm (Mamba-2) or the output after it (Gated DeltaNet)."""

    def __init__(self, width: int, groups: int, eps: float, gate_first: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.groups, self.eps, self.gate_first = groups, eps, gate_first

    def forward(self, x: torch.Tensor, gate: torch.Tensor | None = None) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        if gate is not None and self.gate_first:
            x = x * F.silu(gate.float())
        g = x.view(*x.shape[:-1], self.groups, -1)  # (..., G, width / G)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        x = self.weight * g.view(x.shape).to(dtype)
        if gate is not None and not self.gate_first:
            x = x * F.silu(gate.float())
        return x.to(dtype)


def causal_conv(conv: nn.Conv1d, x: torch.Tensor, cache: dict | None) -> torch.Tensor:
    """Depthwise causal conv1d of x (B, C, T), then silu. Without a cache: the module's own conv
    (padded by d_conv - 1 on both sides) cut to T. With one: the kept inputs before x, and the last
    d_conv inputs kept for the next call."""
    T, K = x.shape[-1], conv.kernel_size[0]
    if cache is None:
        return F.silu(conv(x)[..., :T])
    kept = cache.get("conv")
    if kept is None:
        kept = x.new_zeros(*x.shape[:-1], K)
    full = torch.cat([kept, x], dim=-1)  # (B, C, K + T)
    cache["conv"] = full[..., -K:]
    return F.silu(F.conv1d(full, conv.weight, conv.bias, groups=conv.groups)[..., -T:])


# ---------------------------------------------------------------- the scans (element-wise only)


def run_scan(scan, cache: dict | None, *inputs: torch.Tensor):
    """The scan, checkpointed when autograd records a training pass (no cache): autograd then keeps
    the scan's inputs only and recomputes its steps in backward, as fused SSM kernels do; the output
    is the same. With a cache, or without grad, the scan runs as it is."""
    if cache is None and torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        return checkpoint(scan, *inputs, use_reentrant=False)
    return scan(*inputs)


def steps(x: torch.Tensor) -> range:
    """The time steps a scan runs over x (B, T, ...): every one; on the meta device, where tensors hold no
    values, the first only. A step is element-wise (no FLOPs for FlopCounterMode, nothing autograd keeps
    under checkpoint), so one step gives the output's and state's shapes and the graph, and a 262,144-token
    meta pass (verify at max_positions) costs what a one-token pass does."""
    return range(1) if x.is_meta else range(x.shape[1])


def stacked(outputs: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The per-step outputs as (B, T, ...); on the meta device the one step computed, broadcast over T."""
    y = torch.stack(outputs, dim=1)
    return y.expand(y.shape[0], x.shape[1], *y.shape[2:]) if x.is_meta else y


def mamba_scan(u, dt, A, B, C, h):
    """h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t, y_t = C_t h_t per channel: u, dt (B, T, I); A (I, N);
    B, C (B, T, N); h (B, I, N). Returns y (B, T, I) and the last h."""
    ys = []
    for t in steps(u):
        decay = torch.exp(dt[:, t, :, None] * A)  # (B, I, N)
        x = dt[:, t, :, None] * B[:, t, None, :] * u[:, t, :, None]  # (B, I, N)
        h = decay * h + x
        ys.append((h * C[:, t, None, :]).sum(-1))  # (B, I)
    return stacked(ys, u), h


def mamba2_scan(x, dt, A, B, C, h):
    """Mamba-2's recurrence with a scalar decay per head: h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_tᵀ,
    y_t = h_t C_t: x (B, T, H, P); dt (B, T, H); A (H,); B, C (B, T, H, N); h (B, H, P, N)."""
    ys = []
    for t in steps(x):
        decay = torch.exp(dt[:, t] * A)[..., None, None]  # (B, H, 1, 1)
        inp = (dt[:, t, :, None] * B[:, t])[:, :, None, :] * x[:, t, ..., None]  # (B, H, P, N)
        h = h * decay + inp
        ys.append((h * C[:, t, :, None, :]).sum(-1))  # (B, H, P)
    return stacked(ys, x), h


def deltanet_scan(q, k, v, g, beta, S):
    """The gated delta rule: S_t = exp(g_t) S_{t-1} + k_t (beta_t (v_t - S_{t-1}ᵀ k_t))ᵀ after the
    decay, o_t = S_tᵀ q_t: q, k (B, T, H, dk); v (B, T, H, dv); g, beta (B, T, H); S (B, H, dk, dv)."""
    outs = []
    for t in steps(q):
        S = S * torch.exp(g[:, t])[..., None, None]
        remembered = (S * k[:, t, ..., None]).sum(-2)  # (B, H, dv)
        delta = (v[:, t] - remembered) * beta[:, t, :, None]  # (B, H, dv)
        S = S + k[:, t, ..., None] * delta[:, :, None, :]  # (B, H, dk, dv)
        outs.append((S * q[:, t, ..., None]).sum(-2))  # (B, H, dv)
    return stacked(outs, q), S


# ---------------------------------------------------------------- the mixers


class Mamba(nn.Module):
    """Mamba's selective SSM block as Jamba runs it: in_proj to the conv input and the gate z, a
    causal depthwise conv, x_proj to (dt, B, C) with RMSNorms on each (Jamba), dt_proj, the scan,
    the D skip, the silu gate, out_proj."""

    component = "mixer"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        m = spec.mixer
        d, self.inner, self.state, self.rank = spec.d_model, m.d_inner, m.d_state, m.dt_rank
        I, N, R = self.inner, self.state, self.rank
        self.in_proj = nn.Linear(d, 2 * I, bias=m.bias)
        self.conv1d = nn.Conv1d(I, I, m.d_conv, groups=I, padding=m.d_conv - 1, bias=m.conv_bias)
        self.x_proj = nn.Linear(I, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, I, bias=True)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)).repeat(I, 1))  # (I, N)
        self.D = nn.Parameter(torch.ones(I))
        self.out_proj = nn.Linear(I, d, bias=m.bias)
        self.norms = m.dt_norms
        if m.dt_norms:
            self.dt_layernorm = GatedRMSNorm(R, 1, spec.norm_eps, gate_first=True)
            self.b_layernorm = GatedRMSNorm(N, 1, spec.norm_eps, gate_first=True)
            self.c_layernorm = GatedRMSNorm(N, 1, spec.norm_eps, gate_first=True)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        b = x.shape[0]
        u, z = self.in_proj(x).transpose(1, 2).chunk(2, dim=1)  # (B, I, T) each
        u = causal_conv(self.conv1d, u, cache).transpose(1, 2)  # (B, T, I)
        dt, B, C = self.x_proj(u).split([self.rank, self.state, self.state], dim=-1)
        if self.norms:
            dt, B, C = self.dt_layernorm(dt), self.b_layernorm(B), self.c_layernorm(C)
        dt = F.softplus(self.dt_proj(dt).float())  # (B, T, I)
        A = -torch.exp(self.A_log.float())  # (I, N)
        h = cache.get("state") if cache is not None else None
        if h is None:
            h = x.new_zeros(b, self.inner, self.state, dtype=torch.float32)
        y, h = run_scan(mamba_scan, cache, u.float(), dt, A, B.float(), C.float(), h)  # (B, T, I)
        if cache is not None:
            cache["state"] = h
        y = (y + u * self.D) * F.silu(z.transpose(1, 2))
        return self.out_proj(y.to(x.dtype))


class Mamba2(nn.Module):
    """Mamba-2's block: one in_proj to (z, x, B, C, dt), a causal depthwise conv over (x, B, C),
    dt = softplus(dt + dt_bias) (clamped to [dt_min, dt_max]), the scan with a scalar decay per
    head, the D skip, silu(z) times y, then an RMSNorm in `groups` groups (norm "gated"; "before_gate":
    the norm first, then silu(z); "none": silu(z) times y alone), out_proj. `m`: the mixer's table (default
    the layer's attention; Falcon-H1's beside its attention, attention.ssm)."""

    component = "mixer"

    def __init__(self, spec: ModelSpec, m=None):
        super().__init__()
        m = m or spec.mixer
        d, self.heads, self.head_dim, self.state, self.groups = spec.d_model, m.heads, m.head_dim, m.d_state, m.groups
        self.inner = m.heads * m.head_dim
        self.conv_dim = self.inner + 2 * m.groups * m.d_state
        self.dt_min, self.dt_max = m.dt_min, m.dt_max
        self.in_proj = nn.Linear(d, self.inner + self.conv_dim + m.heads, bias=m.bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, m.d_conv, groups=self.conv_dim, padding=m.d_conv - 1,
                                bias=m.conv_bias)  # fmt: skip
        self.dt_bias = nn.Parameter(torch.ones(m.heads))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, m.heads + 1, dtype=torch.float32)))
        self.D = nn.Parameter(torch.ones(m.heads))
        self.norm = None if m.norm == "none" else GatedRMSNorm(self.inner, m.groups, spec.norm_eps,
                                                               gate_first=m.norm == "gated")  # fmt: skip
        self.out_proj = nn.Linear(self.inner, d, bias=m.bias if m.out_bias is None else m.out_bias)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        b, T, _ = x.shape
        H, P, N, G = self.heads, self.head_dim, self.state, self.groups
        z, xbc, dt = self.in_proj(x).split([self.inner, self.conv_dim, H], dim=-1)
        xbc = causal_conv(self.conv1d, xbc.transpose(1, 2), cache).transpose(1, 2)  # (B, T, C)
        xs, B, C = xbc.split([self.inner, G * N, G * N], dim=-1)
        dt = F.softplus(dt + self.dt_bias).clamp(self.dt_min, self.dt_max)  # (B, T, H)
        xs = xs.float().view(b, T, H, P)
        B, C = (t.float().view(b, T, G, N).repeat_interleave(H // G, dim=2) for t in (B, C))  # (B, T, H, N)
        A = -torch.exp(self.A_log.float())  # (H,)
        h = cache.get("state") if cache is not None else None
        if h is None:
            h = x.new_zeros(b, H, P, N, dtype=torch.float32)
        y, h = run_scan(mamba2_scan, cache, xs, dt.float(), A, B, C, h)  # (B, T, H, P)
        if cache is not None:
            cache["state"] = h
        y = (y + self.D[:, None] * xs).reshape(b, T, self.inner)
        if self.norm is None:  # Falcon-H1 without its norm: y * silu(z)
            return self.out_proj((y * F.silu(z.float())).to(x.dtype))
        return self.out_proj(self.norm(y, z).to(x.dtype))


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(|x|^2 + eps) over the last dimension (the FLA library's form)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


class GatedDeltaNet(nn.Module):
    """Gated DeltaNet: q, k, v through a causal depthwise conv, q and k L2-normalised (q also by
    1/sqrt(dk)) and shared by `value_heads / key_heads` value heads each, the decay
    g = -exp(A_log) softplus(a + dt_bias) and step beta = sigmoid(b), the delta-rule scan, an
    RMSNorm per value head times silu(z), out_proj. The projections are fused and interleaved per
    key head (Qwen3-Next) or split (Qwen3.5)."""

    component = "mixer"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        m = spec.mixer
        d = spec.d_model
        self.kh, self.vh, self.dk, self.dv = m.key_heads, m.value_heads, m.d_key, m.d_value_head
        self.key_dim, self.value_dim = m.key_heads * m.d_key, m.value_heads * m.d_value_head
        conv = 2 * self.key_dim + self.value_dim
        self.fused = m.projections == "fused"
        if self.fused:
            self.in_proj_qkvz = nn.Linear(d, 2 * self.key_dim + 2 * self.value_dim, bias=False)
            self.in_proj_ba = nn.Linear(d, 2 * m.value_heads, bias=False)
        else:
            self.in_proj_qkv = nn.Linear(d, conv, bias=False)
            self.in_proj_z = nn.Linear(d, self.value_dim, bias=False)
            self.in_proj_b = nn.Linear(d, m.value_heads, bias=False)
            self.in_proj_a = nn.Linear(d, m.value_heads, bias=False)
        self.conv1d = nn.Conv1d(conv, conv, m.d_conv, groups=conv, padding=m.d_conv - 1, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(m.value_heads))
        self.A_log = nn.Parameter(torch.log(torch.linspace(1, 16, m.value_heads)))
        self.norm = GatedRMSNorm(self.dv, 1, spec.norm_eps, gate_first=False)
        self.out_proj = nn.Linear(self.value_dim, d, bias=False)

    def _project(self, x: torch.Tensor):
        """q, k, v (flat, B, T, width each), z (B, T, Hv, dv), b and a (B, T, Hv)."""
        b, T, _ = x.shape
        r = self.vh // self.kh  # value heads per key head
        if self.fused:  # per key head: q, k, then the r value heads' v and z; b and a likewise
            qkvz = self.in_proj_qkvz(x).view(b, T, self.kh, 2 * self.dk + 2 * r * self.dv)
            q, k, v, z = qkvz.split([self.dk, self.dk, r * self.dv, r * self.dv], dim=-1)
            bb, a = self.in_proj_ba(x).view(b, T, self.kh, 2 * r).split([r, r], dim=-1)
            q, k, v = (t.reshape(b, T, -1) for t in (q, k, v))
            return q, k, v, z.reshape(b, T, self.vh, self.dv), bb.reshape(b, T, self.vh), a.reshape(b, T, self.vh)
        q, k, v = self.in_proj_qkv(x).split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        z = self.in_proj_z(x).view(b, T, self.vh, self.dv)
        return q, k, v, z, self.in_proj_b(x), self.in_proj_a(x)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        b, T, _ = x.shape
        q, k, v, z, bb, a = self._project(x)
        qkv = causal_conv(self.conv1d, torch.cat([q, k, v], dim=-1).transpose(1, 2), cache).transpose(1, 2)
        q, k, v = qkv.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        r = self.vh // self.kh
        q, k = (t.reshape(b, T, self.kh, self.dk).repeat_interleave(r, dim=2).float() for t in (q, k))  # (B, T, Hv, dk)
        q, k = l2norm(q) * self.dk**-0.5, l2norm(k)
        v = v.reshape(b, T, self.vh, self.dv).float()
        beta = bb.sigmoid().float()  # (B, T, Hv)
        g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)  # (B, T, Hv)
        S = cache.get("state") if cache is not None else None
        if S is None:
            S = x.new_zeros(b, self.vh, self.dk, self.dv, dtype=torch.float32)
        o, S = run_scan(deltanet_scan, cache, q, k, v, g, beta, S)  # (B, T, Hv, dv)
        if cache is not None:
            cache["state"] = S
        o = self.norm(o.to(x.dtype), z)  # (B, T, Hv, dv)
        return self.out_proj(o.reshape(b, T, self.value_dim))


MIXERS = {"mamba": Mamba, "mamba2": Mamba2, "gated_deltanet": GatedDeltaNet}
