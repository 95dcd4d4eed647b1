"""What a norm keeps for backward on torch's CPU kernels (the rule set 'torch-cpu'), measured on the
reference model: LayerNorm its input and mean and 1/std per row; torch's composite RMSNorm its input
in fp32, 1/rms per row and, with a weight, the normalised x."""

from archspec.describe.entries import Norm
from archspec.describe.parts import Part
from archspec.memory.saved.record import ALWAYS, LAYER, Saved
from archspec.spec.model import ModelSpec


def norm_saved(spec: ModelSpec, width: int, kept: tuple[str, ...] = LAYER,
               shared_input: bool = False) -> tuple[Saved, ...]:  # fmt: skip
    """A norm over `width` values of the spec's kind; autograd keeps its input (`shared_input`: another
    norm of the same input keeps it already, as the two norms of a parallel block)."""
    if spec.norm == "layernorm":  # the input, and mean and 1/std per row in the input's dtype (CPU)
        return (Saved("norms", 2, kept=kept),) + (() if shared_input else (Saved("norms", width, kept=kept),))
    # torch's composite RMSNorm: the fp32 input, 1/rms per row and, with a weight, the normalised x (fp32)
    own = 1 + width * (spec.norm_affine != "none")
    upcast = Saved("norms", width, dtype="fp32_copy" if shared_input else "fp32", kept=kept)
    return Saved("norms", own, dtype="fp32", kept=kept), upcast


def norm(spec: ModelSpec, part: Part) -> tuple[Saved, ...]:
    """The rule of a norm part (form 'norm'): in a layer, kept as the layer is; outside, in every mode."""
    (entry,) = (e for e in part.entries if isinstance(e, Norm))
    return norm_saved(spec, entry.width, LAYER if part.layered else ALWAYS, part.shares_input)
