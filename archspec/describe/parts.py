"""The description's unit: a ``Part``, one component at one place in the model, and its tensors.

A part holds its component name (the breakdown's key and the reference model's module name), its
role, its module path, the layers that repeat it, its typed entries (archspec.describe.entries) and its
form (what kind of part it is: 'norm', 'attention', 'mlp', 'mamba2', ..., which the rule sets of
archspec.memory.saved read to say what it keeps for backward);
``tensors(parts)`` walks every parameter tensor by full path. ``norm_part`` is the one norm every
sub-layer, stack and head uses. The parts of attention are in archspec.describe.attention, of the
MLP and experts in archspec.describe.mlp, of the recurrent mixers in archspec.describe.mixers;
archspec.describe.blocks lays the whole model out from them.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from collections.abc import Iterator
from typing import NamedTuple

from archspec.core.vocab import COMPONENTS, ROLES, Role
from archspec.describe.entries import Cached, Entry, Norm, StackShape
from archspec.spec.layers import LayerGroup
from archspec.spec.model import ModelSpec

__all__ = ["COMPONENTS", "ROLES", "Part", "Role", "Tensor", "norm_part", "tensors"]  # the breakdown's vocabulary


class Part(NamedTuple):
    """One component at one place in the model: `path` is the reference module's path, with `{i}`
    standing for the layer index when `repeat` layers each hold one."""

    path: str
    component: str
    role: Role
    entries: tuple[Entry, ...]
    repeat: int = 1  # layers that run it
    stack: StackShape | None = None
    form: str = ""  # what kind of part it is, for the rules that read it ('' : one that keeps nothing)
    cached: tuple[Cached, ...] = ()
    group: LayerGroup | None = None  # the layers that hold it: their kind, spec and indices
    shared: bool = False  # one copy of the parameters serves every layer (ALBERT)
    holds: bool = True  # False: its parameters are another kind's (shared layers of kinds that differ in no tensor)
    shares_input: bool = False  # its input is another part's (the two norms or sub-layers of a parallel block)
    first: bool = False  # the first part of its layer: the layer's input enters here

    @property
    def layered(self) -> bool:
        return "{i}" in self.path

    @property
    def kind(self) -> str | None:
        """The layer kind of a layered part (DeepSeek-V3: 'dense' or 'moe')."""
        return self.group.kind if self.group is not None else None

    @property
    def copies(self) -> int:
        """Copies of its parameters: one per layer, or one for all when shared."""
        if not self.holds:
            return 0
        return 1 if self.shared else self.repeat

    def params(self) -> int:
        """Parameters of one copy of this part."""
        return sum(_numel(shape) for e in self.entries for _, shape in e.tensors())

    def inactive(self) -> int:
        """Parameters of one copy that a token does not use: the experts it is not routed to."""
        return sum(e.inactive() for e in self.entries)

    def paths(self) -> Iterator[str]:
        """The module path of every copy (walks the layers: for checking tensor by tensor, not counting)."""
        if not self.holds:
            return
        if not self.layered:
            yield self.path
        elif self.shared:
            yield self.path.format(i=0)
        else:
            for i in self.group.indices():
                yield self.path.format(i=i)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _join(*names: str) -> str:
    return ".".join(n for n in names if n)


class Tensor(NamedTuple):
    """One parameter tensor of the model: its full module path, shape, component and role."""

    path: str
    shape: tuple[int, ...]
    component: str
    role: Role


def tensors(parts: list[Part]) -> Iterator[Tensor]:
    """Every parameter tensor, by full path (`decoder.layers.3.attention.qkv.weight`)."""
    for part in parts:
        for path in part.paths():
            for entry in part.entries:
                for name, shape in entry.tensors():
                    yield Tensor(_join(path, entry.name, name), shape, part.component, part.role)


def norm_part(spec: ModelSpec, path: str, stack: StackShape, width: int | None = None,
              shared_input: bool = False) -> Part:  # fmt: skip
    """A norm over d_model (or `width`); `shared_input`: another norm reads the same input (the two norms
    of a parallel block)."""
    w = width or spec.d_model
    return Part(path, "norm", "dense", (Norm("", w, spec.norm, affine=spec.norm_affine),), stack=stack,
                form="norm", shares_input=shared_input)  # fmt: skip
