"""What autograd keeps for backward: rule sets that turn each part of the description into the tensors
one training step saves (``Saved`` records), apart from the description itself.

The description (archspec.describe) says what a part is: its entries, its form (``Part.form``: 'norm',
'attention', 'mlp', 'mamba2', ...), whether its input is another part's (``shares_input``) and whether a
layer's input enters at it (``first``). A rule set maps each form to a rule ``rule(spec, part)`` that
answers what that part keeps, read from the spec its layers see and the part's entries; parts of a form
a set does not name keep nothing. What is kept depends on the kernels that run, so each set is named for
where its figures were measured:

- ``torch-cpu``: what torch's CPU kernels keep, measured storage by storage on the reference model
  (archspec.reference.memory_measure; tests/test_activations*.py and tests/test_memory_measured.py hold
  every figure equal to the measurement). Its rules, one module per part kind: ``norms``,
  ``attention`` (standard, cross and latent, their options and position terms), ``mlp`` (the MLP,
  router and experts), ``mixers`` (Mamba, Mamba-2, Gated DeltaNet) and ``model`` (a stack's input,
  positions, projections, the head and the loss, a layer's input under full recomputation).

A variant for other kernels (a GPU's fused attention, which keeps the log-sum-exp where the CPU's
explicit products keep the probabilities) is one more set: a copy of ``TORCH_CPU`` with the rules that
differ replaced, registered in ``RULE_SETS`` under its name, and proven by the same measurement on
that device.
"""

from collections.abc import Callable

from archspec.core.errors import SpecError, shown
from archspec.describe.parts import Part
from archspec.memory.saved import attention, mixers, mlp, model, norms
from archspec.memory.saved.record import ALWAYS, CHECKPOINT, LAYER, SCORES, SELECTIVE, Saved
from archspec.spec.model import ModelSpec

Rule = Callable[[ModelSpec, Part], tuple[Saved, ...]]

TORCH_CPU: dict[str, Rule] = {
    "stack_input": model.stack_input,
    "position": model.position,
    "projection": model.projection,
    "head": model.head,
    "layer_input": model.layer_input,  # with a layer's first part (Part.first)
    "norm": norms.norm,
    "attention": attention.attention,
    "cross_attention": attention.attention,
    "mlp": mlp.mlp,
    "router": mlp.router,
    "experts": mlp.experts,
    "shared_experts": mlp.shared_experts,
    "mamba": mixers.mamba,
    "mamba2": mixers.mamba2,
    "gated_deltanet": mixers.gated_deltanet,
}

RULE_SETS: dict[str, dict[str, Rule]] = {"torch-cpu": TORCH_CPU}
DEFAULT_RULES = "torch-cpu"

__all__ = ["ALWAYS", "CHECKPOINT", "DEFAULT_RULES", "LAYER", "RULE_SETS", "SCORES", "SELECTIVE", "TORCH_CPU",
           "Rule", "Saved", "rule_set", "saved"]  # fmt: skip


def rule_set(name: str) -> dict[str, Rule]:
    """The rule set called `name`; SpecError naming the known ones otherwise."""
    if name not in RULE_SETS:
        raise SpecError(f"unknown rule set {shown(name)} for saved tensors; use {', '.join(RULE_SETS)}")
    return RULE_SETS[name]


def saved(spec: ModelSpec, part: Part, rules: dict[str, Rule] = TORCH_CPU) -> tuple[Saved, ...]:
    """What `part` keeps for backward under `rules`; `spec` is the model's (a layer's part reads the spec
    its layers see, its group's)."""
    seen = part.group.spec if part.group is not None else spec
    rule = rules.get(part.form)
    out = rule(seen, part) if rule is not None else ()
    if part.first:
        out += rules["layer_input"](seen, part)
    return out
