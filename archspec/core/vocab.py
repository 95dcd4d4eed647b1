"""The enumerated choices that several layers read, each written once.

The planner's validators (archspec.memory), the command line's ``choices=`` and the reference model
(archspec.reference) read them from here; tests/test_vocab.py holds every copy equal. What belongs
to one model stays with it: the storage formats and their bits (archspec.memory.STORAGE). The MLP
activations are one table (``ACTIVATIONS``): the spec's choices, which are gated, the element-wise
function and its cost, and the Hugging Face names of each are read from it. The breakdown's components and
roles are here because the reference model tags its modules with them and must not import the
description (docs/architecture.md, "The tree, and what each layer may import"). This module imports nothing
of archspec.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

# ---------------------------------------------------------------- MLP activations


class ActivationFacts(NamedTuple):
    """What the rest of archspec knows of one activation of the MLP's hidden layer."""

    gated: bool  # act(gate(x)) * up(x): two input projections
    function: str  # the element-wise function alone (of the gate, when gated): relu, gelu, silu or relu2
    op: str  # what the hidden layer runs per element: the function, or gpt-oss's clamped SwiGLU
    cost: int  # non-matmul operations of `op` per hidden element (an estimate; a gated MLP adds its product)
    hf: tuple[str, ...]  # transformers' ACT2FN names that mean it (of the gate's function, when gated)


# transformers' GELU variants (erf, tanh approximation) differ in the computation only; counts and
# matmul FLOPs agree
HF_GELUS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "gelu_accurate")

ACTIVATIONS = {
    "relu": ActivationFacts(False, "relu", "relu", 1, ("relu",)),
    "gelu": ActivationFacts(False, "gelu", "gelu", 8, HF_GELUS),
    "silu": ActivationFacts(False, "silu", "silu", 4, ("silu", "swish")),
    "swiglu": ActivationFacts(True, "silu", "silu", 4, ("silu", "swish")),
    "geglu": ActivationFacts(True, "gelu", "gelu", 8, HF_GELUS),
    "relu2": ActivationFacts(False, "relu2", "relu2", 2, ()),  # relu, square (Nemotron-H; So et al. 2021)
    # gpt-oss: (up + 1) * gate * sigmoid(1.702 gate), both clamped: two clamps, scale, sigmoid (4),
    # product, add one; alone (a head that applies the activation to one input) it is SiLU
    "clamped_swiglu": ActivationFacts(True, "silu", "clamped_swiglu", 9, ()),
}
ActivationName = Literal[tuple(ACTIVATIONS)]  # the spec's field: one of the names above
GATED_ACTIVATIONS = frozenset(name for name, a in ACTIVATIONS.items() if a.gated)


def hf_activations(gated: bool) -> dict[str, str]:
    """transformers' activation name -> the spec's activation, for a plain MLP or a gated one."""
    return {hf: name for name, a in ACTIVATIONS.items() if a.gated == gated for hf in a.hf}


# ---------------------------------------------------------------- dtypes

# the floating-point dtypes the planner counts, by archspec's short name, with torch's name of each
# (the reference model builds in it; fp8 is E4M3, its E5M2 sibling has the same bytes). The
# reference model also builds in any other floating dtype torch names (float64).
FLOAT_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}

# other names of the short ones: torch's (torch.float32, bfloat16, float8_e4m3fn ...), C's
DTYPE_ALIASES = {
    **{torch_name: short for short, torch_name in FLOAT_DTYPES.items()},
    "float": "fp32",
    "half": "fp16",
    "float8": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2": "fp8",
    "float8_e5m2fnuz": "fp8",
}


def dtype_key(name: object) -> str | None:
    """'torch.bfloat16' -> 'bf16', ' FP16 ' -> 'fp16': the short name of a dtype name (unknown names
    come back normalised, for the caller to refuse); None for what is not a string."""
    if not isinstance(name, str):
        return None
    n = name.strip().lower().removeprefix("torch.")
    return DTYPE_ALIASES.get(n, n)


# ---------------------------------------------------------------- how training runs

Attention = Literal["flash", "eager"]
ATTENTION: tuple[str, ...] = get_args(Attention)  # --attention; flash (a fused kernel) is the default

Recompute = Literal["none", "selective", "full"]
RECOMPUTE: tuple[str, ...] = get_args(Recompute)  # activation recomputation (Korthikanti et al. 2022)

OFFLOAD = ("optimizer",)  # --offload: what may live in host memory (the optimizer states and fp32 master copy)

# estimate_memory's training options that fit and `archspec fit` pass on (fit's `training`); the flags are booleans
TRAINING_FLAGS = ("fp32_grads", "dropout")
TRAINING_OPTIONS = ("recompute", "attention", "optimizer", *TRAINING_FLAGS, "offload")

ZERO_STAGES = (0, 1, 2, 3)  # ZeRO (Rajbhandari et al. 2020): nothing, optimizer, + gradients, + weights sharded

# ---------------------------------------------------------------- the breakdown

# the components of the breakdown by component: the description's Part.component, the reference
# model's module tags (`component = "mlp"`), count_params(spec).components' keys, in this order
COMPONENTS = ("embed", "position", "token_type", "attention", "cross_attention", "mixer", "mlp", "router",
              "experts", "shared_experts", "norm", "pooler", "head", "mtp")  # fmt: skip

# what a parameter does for one token (active parameters): Part.role and the reference modules' `role`
Role = Literal["embedding", "dense", "head", "router", "expert", "shared_expert"]
ROLES: tuple[str, ...] = get_args(Role)


def attention_runs(mode: str, *, softcap: float | None = None, sinks: bool = False, d_qk: int, d_v: int,
                   cpu_training: bool = True) -> str:  # fmt: skip
    """The attention that actually runs when `mode` is asked: no fused kernel soft-caps scores or
    has sinks, and the CPU's fused kernel (in training) needs queries and values of one width, so
    those run 'eager' (explicit products, the probabilities stored) whatever is asked. The planner
    plans what the reference model runs in a CPU training step (`cpu_training`)."""
    if softcap is not None or sinks or (cpu_training and d_qk != d_v):
        return "eager"
    return mode
