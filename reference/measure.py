"""Measuring the reference model: unique parameters by component (and, in flops.py, FLOPs)."""

from __future__ import annotations

from torch import nn

from archspec.core.vocab import COMPONENTS, ROLES


def owners(model: nn.Module) -> dict[str, str]:
    """Module path -> component, for each tagged module with no tagged ancestor."""
    out: dict[str, str] = {}
    for path, module in model.named_modules():
        comp = getattr(module, "component", None)
        if comp is None:
            continue
        if any(path == p or path.startswith(p + ".") for p in out):
            continue
        out[path] = comp
    return out


def count_by_tag(model: nn.Module, tag: str, keys: tuple[str, ...], default: str | None = None) -> dict[str, int]:
    """Unique parameters rolled up by a module tag (`component`, `role`), inherited from the nearest
    tagged ancestor; `default` where no module on the path carries one.

    A tied tensor counts once, under the first module that registers it (the token embedding,
    which the model registers before the output head). A module's `parameter_<tag>s` files some of
    its own parameters elsewhere (the MoE's correction bias under the router); a module whose
    `seals` names the tag gives it to everything below it (the MTP modules: component 'mtp'). A
    parameter with no tag is an error, not a silent zero.
    """
    counts = dict.fromkeys(keys, 0)
    seen: set[int] = set()
    tags: dict[str, str | None] = {}  # module path -> its tag, or its nearest tagged ancestor's
    sealed: dict[str, bool] = {}  # module path -> whether an ancestor's tag holds for everything below it
    for path, module in model.named_modules():  # parents come before their children
        parent = path.rpartition(".")[0] if path else None
        if parent is not None and sealed[parent]:
            tags[path], sealed[path] = tags[parent], True
        else:
            tags[path] = getattr(module, tag, None) or (tags[parent] if parent is not None else default)
            sealed[path] = tag in getattr(module, "seals", ())
        own = getattr(module, f"parameter_{tag}s", {})  # a module's own parameter filed elsewhere
        for name, p in module.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            where = tags[path] if sealed[path] else own.get(name, tags[path])
            if where is None:
                raise ValueError(f"parameter {path}.{name} has no {tag}")
            counts[where] += p.numel()
    return counts


def count_by_component(model: nn.Module) -> dict[str, int]:
    """Unique parameters by the component tag of the module that holds them (see count_by_tag)."""
    return count_by_tag(model, "component", COMPONENTS)


def count_by_role(model: nn.Module) -> dict[str, int]:
    """Unique parameters by role: embedding tables, the head, routers, experts, shared experts, and
    everything else dense (see count_by_tag)."""
    return count_by_tag(model, "role", ROLES, default="dense")


def count_total(model: nn.Module) -> int:
    """Sum of unique parameter sizes (nn.Module.parameters() already skips tied duplicates)."""
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- FLOPs


def example_inputs(spec, batch: int = 1, seq_len: int | None = None, src_len: int | None = None, device="meta"):
    """Token tensors for one forward pass: (tokens,) or (src, tgt) for an encoder-decoder."""
    import torch

    T = spec.max_positions if seq_len is None else seq_len
    tgt = torch.zeros(batch, T, dtype=torch.long, device=device)
    if spec.kind == "encoder-decoder":
        S = T if src_len is None else src_len
        return (torch.zeros(batch, S, dtype=torch.long, device=device), tgt)
    return (tgt,)


def measure_flops(model: nn.Module, inputs: tuple, backward: bool = False) -> tuple[int, dict[str, int]]:
    """torch's FlopCounterMode over model(*inputs), the pooler where the model has one, and with
    `backward` the backward pass of their sum: total and by component.

    scaled_dot_product_attention runs its math decomposition, whose bmm's are counted (a fused CPU
    kernel has no FLOP formula and would count as zero). A mixture of experts really routes its
    tokens on a real device; on the meta device it spreads the N·k routed rows evenly.
    """
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    # On a real device, SDPA's math backend: attention as explicit matmuls, which FlopCounterMode
    # counts (a fused CPU kernel has no formula). On the meta device the fused op has one, and is faster.
    on_meta = next(iter(model.parameters())).is_meta
    backend = contextlib.nullcontext() if on_meta else sdpa_kernel([SDPBackend.MATH])
    with FlopCounterMode(display=False) as counter, backend:
        if getattr(model, "pooler", None) is not None:  # BertModel's forward pools the first token too
            out, pooled = model(*inputs, pool=True)
            loss = out.float().sum() + pooled.float().sum()
        else:
            loss = model(*inputs).float().sum()
        if backward:
            loss.backward()
    by_module = counter.get_flop_counts()
    root = type(model).__name__
    by_component: dict[str, int] = {}
    for path, comp in owners(model).items():
        flops = sum(by_module.get(f"{root}.{path}", {}).values())
        by_component[comp] = by_component.get(comp, 0) + flops
    return counter.get_total_flops(), by_component


FVCORE_MATMUL_OPS = frozenset({"linear", "matmul", "bmm", "addmm", "mm", "einsum", "scaled_dot_product_attention"})


def fvcore_macs(model: nn.Module, inputs: tuple, attention_handler: bool = True) -> tuple[int, dict[str, int]]:
    """fvcore's FlopCountAnalysis (unit: one multiply-accumulate per "flop"): matmul-class MACs and
    the full by-operator table (which also holds fvcore's estimates for norms, outside the matmul bin).

    fvcore has no handler for aten::scaled_dot_product_attention and would skip it with a warning,
    leaving attention's Q·Kᵀ and scores·V out; `attention_handler` registers one.
    """
    from fvcore.nn import FlopCountAnalysis

    if getattr(model, "pooler", None) is not None:
        model = _WithPooler(model)  # BertModel's forward pools the first token too
    analysis = FlopCountAnalysis(model, inputs)
    if attention_handler:
        analysis.set_op_handle("aten::scaled_dot_product_attention", sdpa_macs)
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    by_operator = {k: int(v) for k, v in analysis.by_operator().items()}
    return sum(v for k, v in by_operator.items() if k in FVCORE_MATMUL_OPS), by_operator


def sdpa_macs(inputs, outputs) -> int:
    """MACs of softmax(Q·Kᵀ)·V: B·H·T·S·dk for the scores plus B·H·T·S·dv for the values (full matrix)."""
    from fvcore.nn.jit_handles import get_shape

    q, k, v = (get_shape(x) for x in inputs[:3])
    *batch, T, dk = q
    S, dv = k[-2], v[-1]
    n = 1
    for b in batch:  # B and the query heads (grouped K/V heads are broadcast to them)
        n *= b
    return n * T * S * (dk + dv)


class _WithPooler(nn.Module):
    """model(*inputs, pool=True) as a module of its own, for tracers that take positional inputs only."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        return self.model(*inputs, pool=True)
