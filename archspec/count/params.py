"""The exact parameter counter: a roll-up of the model's description (archspec.describe.blocks).

Conventions (docs/architecture.md, "Conventions that everything shares"):

- a parameter is a unique tensor: a tied matrix counts once (a tied head multiplies by the token
  embedding and owns nothing); buffers (sinusoidal tables, rotary frequencies, masks) are not
  parameters;
- component names are the reference model's module names, so analytic and instantiated counts
  compare key by key; roles (embedding, dense, head) give Kaplan's non-embedding N;
- counts are Python ints, exact at any size.

Layout decisions the reference model shares (see archspec.describe.blocks.describe):

- learned positions: one table per stack (an encoder-decoder has a source and a target table);
- token types: one table, added to the first stack's input (the encoder when there is one);
- embedding norm: one per stack; final norm: one per stack;
- tie_embeddings=false on an encoder-decoder: source embedding, target embedding and output
  projection are three matrices; true: one matrix serves all three (Vaswani et al. 2017, 3.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archspec.core.checks import check_args
from archspec.core.compiled import evaluate
from archspec.core.errors import SpecError
from archspec.core.records import record
from archspec.core.vocab import COMPONENTS, ROLES
from archspec.describe.blocks import Linear, Part, describe, held, stack_shapes
from archspec.spec.model import ModelSpec

__all__ = ["COMPONENTS", "ParamCount", "count_params", "seed_estimate"]


@dataclass(frozen=True, kw_only=True)
class ParamCount:
    """An exact parameter count with its breakdown. Returned, never printed; its JSON record is its
    fields, in this order."""

    name: str
    total: int
    active: int = 0  # parameters one token uses; == total for a dense model
    non_embedding: int
    estimate: int
    components: dict[str, int]
    roles: dict[str, int] = field(default_factory=dict)
    matmul: int = 0  # parameters that take part in matmuls, a tied matrix once (PaLM's N)
    per_layer: dict[str, dict[str, int]]
    # stack -> layer kind -> {"layers": how many, component -> parameters of one layer, "total"}
    kinds: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)

    def share(self, component: str) -> float:
        return self.components[component] / self.total if self.total else 0.0

    def to_dict(self) -> dict:
        return record(self)

    def _repr_html_(self) -> str:  # a table in Jupyter
        from archspec.render.notebook import result_html

        return result_html(self)


def seed_estimate(spec: ModelSpec) -> int:
    """The seed formula 12 * L * d^2 + V * d, with L all blocks of all stacks."""
    return 12 * spec.n_layers * spec.d_model**2 + spec.vocab_size * spec.d_model


def matmul_params(parts: list[Part]) -> int:
    """Parameters that a matmul multiplies each token by, each tensor once: every linear layer with its
    bias (of routed experts, the top_k a token uses), and a table only where a tied projection
    multiplies by it (a tied head counts once)."""
    by_path = {p.path: p for p in parts}
    total, tied = 0, set()
    for part in parts:
        for entry in part.entries:
            if isinstance(entry, Linear):
                total += part.copies * entry.per_row * entry.per_copy  # of experts, those a token uses
                if entry.tied is not None:
                    tied.add(entry.tied)
    return total + sum(by_path[path].params() for path in tied)


def count_params(spec: ModelSpec, mtp: bool = False) -> ParamCount:
    """Exact parameter count of `spec`, by component, role and layer kind; with `mtp`, the
    multi-token-prediction modules too (component 'mtp'; transformers does not build them)."""
    if type(mtp) is not bool or type(spec) is not ModelSpec:
        check_args("count_params", spec=spec, mtp=mtp)
    if mtp and spec.mtp is None:
        raise SpecError(f"count_params: mtp=True: {spec.name} has no multi-token-prediction modules (no [mtp] "
                        "table) to count")  # fmt: skip
    key = ("count_params", bool(mtp))
    return held(spec, key, lambda: evaluate(key, _count_params, spec, bool(mtp)))


def _count_params(spec: ModelSpec, mtp: bool) -> ParamCount:
    parts = describe(spec, mtp=mtp)
    components = dict.fromkeys(COMPONENTS, 0)
    roles = dict.fromkeys(ROLES, 0)
    kinds: dict[str, dict[str, dict[str, int]]] = {s.name: {} for s in stack_shapes(spec)}
    inactive = 0
    for part in parts:
        n = part.params()
        components[part.component] += part.copies * n
        roles[part.role] += part.copies * n
        inactive += part.copies * part.inactive()
        if part.layered and part.component != "mtp":
            layer = kinds[part.stack.name].setdefault(part.kind, {"layers": part.repeat})
            layer[part.component] = layer.get(part.component, 0) + n
    for stack in kinds.values():
        for layer in stack.values():
            layer["total"] = sum(v for k, v in layer.items() if k != "layers")
    # the layer most of each stack has (DeepSeek-V3: an MoE layer, not its 3 dense ones)
    per_layer = {s: dict(max(ks.values(), key=lambda k: k["layers"])) for s, ks in kinds.items() if ks}
    for layer in per_layer.values():
        layer.pop("layers")
    total = sum(components.values())
    return ParamCount(
        name=spec.name,
        total=total,
        components=components,
        per_layer=per_layer,
        non_embedding=total - roles["embedding"] - roles["head"],
        estimate=seed_estimate(spec),
        active=total - inactive,  # less the routed experts a token does not use
        roles=roles,
        matmul=matmul_params(parts),
        kinds=kinds,
    )
