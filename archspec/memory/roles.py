"""Storage by role: which storage format each tensor of the description is held in (archspec/memory).

`--weights` is one format of STORAGE (each quantised format keeps its own rules for tables, head,
norms and router), a map by role (``mlp=fp8_row,attention=bf16``; a role the map leaves out is
bf16), or a named checkpoint layout (LAYOUTS). A tensor's role comes from the description's parts:
their declared role (embedding, head, router, routed expert, shared expert) and component (attention
and the other mixers, the MLP, the MTP modules), never from module names; every 1-D tensor (norm
weights, biases) has the role `norm`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from archspec.core.errors import SpecError, shown
from archspec.core.vocab import dtype_key
from archspec.memory.storage import STORAGE

# role -> what it holds
ROLES = {
    "embedding": "token tables (an MTP module's own table too)",
    "attention": "the matrices of attention and of the other sequence mixers",
    "mlp": "the matrices of dense MLPs",
    "experts": "the routed experts' matrices",
    "shared_experts": "the shared experts' matrices",
    "router": "MoE routers",
    "head": "the output head (an MTP module's own head too)",
    "mtp": "the multi-token-prediction modules' projection and block matrices",
    "norm": "every 1-D tensor: norm weights and biases",
}
REST = "bf16"  # a role a map leaves out


@dataclass(frozen=True)
class Layout:
    """A released checkpoint's storage by role, with its source. `edge`: roles whose first and last
    layers stay in `REST` (Llama 3's FP8 keeps the first and last layers unquantised)."""

    roles: dict[str, str]
    source: str
    edge: tuple[str, ...] = ()


LAYOUTS = {
    "deepseek-fp8": Layout(
        {r: "fp8_block" for r in ("attention", "mlp", "experts", "shared_experts", "mtp")},
        "deepseek-ai/DeepSeek-V3 config.json quantization_config: quant_method fp8, fmt e4m3, weight_block_size "
        "[128, 128] (README_WEIGHTS.md: every linear layer's weight in FP8 with a weight_scale_inv of one fp32 "
        "per 128 x 128 block); token table, head, norms and the routers' gates as released in bf16",
    ),
    "meta-fp8": Layout(
        {"mlp": "fp8_row"},
        "meta-llama/Llama-3.1-405B-Instruct-FP8 (quant_method fbgemm_fp8: row-wise FP8 weights, one fp32 "
        "weight_scale per output row); The Llama 3 Herd of Models, section 6.2: the feedforward layers "
        "quantised, self-attention not, and no quantisation in the first and last Transformer layers",
        edge=("mlp",),
    ),
    "gpt-oss-mxfp4": Layout(
        {"experts": "mxfp4"},
        "openai/gpt-oss-120b config.json quantization_config: quant_method mxfp4, modules_to_not_convert "
        "self_attn, router, embed_tokens, lm_head: the MoE experts' weights in MXFP4 (blocks of 32 with an "
        "e8m0 scale), the rest in bf16",
    ),
}


@dataclass(frozen=True)
class WeightPlan:
    """One --weights value: `single`, a format of STORAGE; or `roles` by role with `edge` as Layout."""

    text: str
    single: str | None = None
    roles: dict[str, str] = field(default_factory=dict)
    edge: tuple[str, ...] = ()

    def format(self, role: str) -> str:
        return self.roles.get(role, REST)


def canonical_weights(text: str, what: str = "--weights") -> str:
    """'bfloat16' -> 'bf16', 'MLP=FP8_row, attention=bf16' -> 'attention=bf16,mlp=fp8_row', a layout's
    name as is; a SpecError naming an unknown format, an unknown role or a role given twice."""
    if not isinstance(text, str):
        raise SpecError(
            f"{what} must be a storage format, a map by role or a layout name, got "
            f"{type(text).__name__} {shown(text, 60)}"
        )
    key = dtype_key(text)
    if key in STORAGE or key in LAYOUTS:
        return key
    if "=" not in text:
        raise SpecError(
            f"unknown {what} format {shown(text)}; use one of {', '.join(STORAGE)}, a layout "
            f"({', '.join(LAYOUTS)}) or a map by role such as mlp=fp8,attention=bf16"
        )
    roles: dict[str, str] = {}
    for item in text.split(","):
        role, _, fmt = (s.strip().lower() for s in item.partition("="))
        if role not in ROLES:
            raise SpecError(f"{what}: unknown role {shown(role)} in {shown(text)}; roles are {', '.join(ROLES)}")
        if role in roles:
            raise SpecError(f"{what}: role {role} is given twice in {shown(text)}")
        f = dtype_key(fmt)
        if f not in STORAGE:
            raise SpecError(f"{what}: unknown format {shown(fmt)} for {role}; use one of {', '.join(STORAGE)}")
        roles[role] = f
    return ",".join(f"{r}={roles[r]}" for r in ROLES if r in roles)


@cache
def weight_plan(text: str) -> WeightPlan:
    key = canonical_weights(text)
    if key in STORAGE:
        return WeightPlan(key, single=key)
    if key in LAYOUTS:
        lay = LAYOUTS[key]
        return WeightPlan(key, roles=dict(lay.roles), edge=lay.edge)
    return WeightPlan(key, roles=dict(item.split("=") for item in key.split(",")))


# the storage role of a part, by the role the description declares (else by its component)
ROLE_BY_PART_ROLE = {"embedding": "embedding", "head": "head", "expert": "experts",
                     "shared_expert": "shared_experts", "router": "router"}  # fmt: skip
ROLE_BY_COMPONENT = {"mtp": "mtp", "norm": "norm", "mlp": "mlp"}


def role_of(part, vector: bool = False) -> str:
    """The storage role of a tensor of `part` (a 1-D one when `vector`), from the part's role and
    component; attention (and every other mixer) otherwise."""
    if vector:
        return "norm"
    return ROLE_BY_PART_ROLE.get(part.role) or ROLE_BY_COMPONENT.get(part.component, "attention")


def model_roles(spec) -> set[str]:
    """The roles whose tensors `spec` holds (its MTP modules' too, where it has them)."""
    from archspec.describe.blocks import describe

    out = set()
    for part in describe(spec, mtp=spec.mtp is not None):
        for e in part.entries:
            for _, shape in e.tensors():
                out.add(role_of(part, len(shape) == 1))
    return out


def check_roles(spec, weights: str) -> None:
    """Refuse a map that names a role `spec` does not have."""
    plan = weight_plan(weights)
    if plan.single is not None or dtype_key(weights) in LAYOUTS:
        return
    lacking = [r for r in plan.roles if r not in model_roles(spec)]
    if lacking:
        raise SpecError(f"--weights {plan.text}: {spec.name} has no {', '.join(lacking)} "
                        f"(its roles: {', '.join(r for r in ROLES if r in model_roles(spec))})")  # fmt: skip
