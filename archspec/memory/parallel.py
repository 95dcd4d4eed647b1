"""Where the weights sit: pipeline stages, Megatron-LM's tensor-parallel splits, expert parallelism,
ZeRO/FSDP shards, and the layouts a number of devices allows (archspec/memory).

ZeRO stage 1 divides optimizer states by the data-parallel degree, stage 2 also gradients, stage 3
also weights; tensor and pipeline parallel degrees divide the weights, gradients and optimizer
states. Each tensor is held in its storage format (archspec.memory.storage.STORAGE).
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from archspec.core.checks import check_args
from archspec.core.errors import SpecError, shown
from archspec.core.vocab import ZERO_STAGES
from archspec.count.params import count_params
from archspec.describe.blocks import AttentionShape, Linear, Part, describe, stack_shapes
from archspec.memory.storage import STORAGE, canonical_format, dtype_bytes, nbytes, scale_bits
from archspec.spec.model import ModelSpec

# Tensor parallelism (Megatron-LM): column-parallel maps split their output rows, row-parallel maps
# their input columns (their biases stay whole); vocabulary tables split their rows; norms, position
# tables and token types stay whole on every rank.
COLUMN_PARALLEL = ("qkv", "q", "kv", "gate", "up", "q_a", "q_b", "kv_a", "kv_b", "router")
ROW_PARALLEL = ("out", "down")


def more_bits_layers(part: Part, lo: int, hi: int) -> int:
    """How many of the part's layers among lo .. hi - 1 use_more_bits picks: the first n/8 and the last
    n/8 layers, and every third in between ((i - n/8) % 3 == 2), counted over the kind's placement."""
    n, where, kind = part.stack.layers, part.group.placement, part.kind
    a, b = n // 8, 7 * n // 8
    return (where.count_in(kind, lo, min(hi, a)) + where.count_in(kind, max(lo, b), hi)
            + where.count_in(kind, max(lo, a), min(hi, b), 3, a + 2))  # fmt: skip


class Slot(NamedTuple):
    """One part on one pipeline stage: the layers lo .. hi - 1 of its stack that the stage holds (0, 1
    for a part outside the blocks), of which `layers` have the part's kind."""

    part: Part
    lo: int
    hi: int
    layers: int = 1

    @property
    def copies(self) -> int:
        if not self.part.holds:
            return 0
        return min(self.layers, 1) if self.part.shared else self.layers


def stage_slots(spec: ModelSpec, pipeline_parallel: int = 1, only: list[int] | None = None) -> list[list[Slot]]:
    """The parts of each of `pipeline_parallel` stages: stage s holds layers s·k .. (s + 1)·k - 1 of all
    the stacks' layers in data-flow order, k = ceil(layers / p); a part outside the blocks sits with the
    next block (embeddings on the first stage, final norm and head on the last); a tied head keeps a
    copy of its table on the last stage (as Megatron-LM does) when p > 1. `only` (sorted stage indices
    that hold the last stage and the first stage of each part's layers, as distinct_stages gives them):
    the parts of those stages alone, in their order."""
    parts = [p for p in describe(spec)]
    which = range(pipeline_parallel) if only is None else only
    total = spec.n_layers
    k = -(-total // pipeline_parallel)
    offsets, at = {}, 0
    for st in stack_shapes(spec):
        offsets[st.name] = at
        at += st.layers
    stages: list[list[Slot]] = [[] for _ in which]
    pending: list[Part] = []
    touched: dict[tuple, list[tuple[int, int, int, int]]] = {}  # (stack, placement, kind) -> its stages
    position = {s: i for i, s in enumerate(which)}
    for part in parts:
        if not part.layered:
            pending.append(part)
            continue
        key = (part.stack.name, id(part.group.placement), part.kind)
        if key not in touched:
            touched[key] = _kind_stages(part, offsets[part.stack.name], k, which, position)
        for i, lo, hi, n in touched[key]:
            stages[i] += [Slot(p, 0, 1) for p in pending]
            pending = []
            stages[i].append(Slot(part, lo, hi, n))
    stages[-1] += [Slot(p, 0, 1) for p in pending]
    head = next((p for p in parts if p.role == "head"), None)
    tied = head is not None and any(isinstance(e, Linear) and e.tied for e in head.entries)
    if pipeline_parallel > 1 and tied:
        stages[-1] += [Slot(p, 0, 1) for p in parts if p.path == "embed"]
    return stages


def _kind_stages(part: Part, g0: int, k: int, which, position: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """(i, lo, hi, layers) for each stage which[i] that holds layers of the part's kind, lo .. hi - 1 the
    layers of its stack that stage holds (`position`: i by stage): found from the kind's own layers when it
    has fewer than there are stages (a stack of many kinds, each in a few layers), else by counting the
    kind's layers in each stage."""
    where, kind, depth = part.group.placement, part.kind, part.stack.layers

    def bounds(s: int) -> tuple[int, int]:
        return max(g0, s * k) - g0, min(g0 + depth, (s + 1) * k) - g0

    if type(depth) is int and where.count(kind) < len(which):
        held = sorted({position[s] for s in ((g0 + j) // k for j in where.indices(kind)) if s in position})
        return [(i, *bounds(which[i]), where.count_in(kind, *bounds(which[i]))) for i in held]
    out = []
    for i, s in enumerate(which):
        lo, hi = bounds(s)
        n = where.count_in(kind, lo, hi) if lo < hi else 0
        if n:
            out.append((i, lo, hi, n))
    return out


def distinct_stages(spec: ModelSpec, pipeline_parallel: int = 1, more_bits: bool = True) -> list[tuple[int, int]]:
    """(stage, how many stages it stands for), by stage: every stage of `pipeline_parallel` is stood for
    by one that holds the same bytes of each part (the same parts, the same layers of each kind, as many
    that use_more_bits picks, the stack's first or last layer alike). A stage whose layers lie in one
    region of every stack (between its first layer, its last, its n/8 and 7n/8 marks, the ends of its
    placement's runs) holds what the stage m later in that region holds, m·k layers being a multiple of
    L = the patterns' periods (and 3 between the n/8 and 7n/8 marks, where use_more_bits picks every third
    layer); so the stages that cross a region's edge, the first and last, and the first m of each stretch
    between them stand for all, however many stages there are. Without `more_bits` (no format whose
    use_more_bits picks layers), the n/8 and 7n/8 marks and the 3 go."""
    k = -(-spec.n_layers // pipeline_parallel)
    edges, period, at, middles = {0, spec.n_layers}, 1, 0, []
    parts = [p for p in describe(spec) if p.layered]
    for st in stack_shapes(spec):
        n = st.layers
        edges |= {at + x for x in (0, 1, n - 1, n)}
        if more_bits:  # use_more_bits picks every layer of the first and last eighths, every third between
            edges |= {at + n // 8, at + 7 * n // 8}
            middles.append((at + n // 8, at + 7 * n // 8))
        for g in {p.group.placement for p in parts if p.stack.name == st.name}:
            run = 0
            for _, r in g.runs:
                run += r
                edges.add(at + min(run, g.depth))
            edges.add(at + g.depth)
            period = math.lcm(period, len(g.pattern))
        at += n
    picked = {0, pipeline_parallel - 1} | {min(x // k, pipeline_parallel - 1) for x in edges}
    picked |= {min(max(x - 1, 0) // k, pipeline_parallel - 1) for x in edges}
    marks = sorted(picked)
    out = {s: 1 for s in marks}
    for a, b in zip(marks, marks[1:]):  # the stretch a + 1 .. b - 1: its first m stand for the rest
        lo, hi = (a + 1) * k, b * k  # its layers: every third of them picked only between a stack's eighths
        every = math.lcm(3, period) if any(lo < top and bottom < hi for bottom, top in middles) else period
        m = every // math.gcd(k, every)
        for r in range(min(m, b - a - 1)):
            out[a + 1 + r] = -(-(b - a - 1 - r) // m)
    return sorted(out.items())


def module_name(part: Part, entry_name: str) -> str:
    return ".".join(n for n in (part.path, entry_name) if n).rsplit(".", 1)[-1]


def slot_bytes(slot: Slot, weights: str, experts: str | None = None, tensor_parallel: int = 1,
               expert_parallel: int = 1, tied_table: bool = False) -> Fraction:  # fmt: skip
    """Bytes one device holds of `slot`: every tensor in its format (`weights`: one format of STORAGE,
    a map by role or a layout, archspec.memory.roles; `experts` for the routed experts when given), its
    scales as the format stores them, split as Megatron-LM splits it over `tensor_parallel` devices, a
    routed expert stack over `expert_parallel` devices. `tied_table`: the token table also serves as
    the head (a quantised format may store it as the head)."""
    return held_bytes(slot, part_bits(slot.part, weights, experts, tensor_parallel, expert_parallel, tied_table))


class PartBits(NamedTuple):
    """What one copy of a part holds, in bits, from which the bytes of any slot of it follow
    (held_bytes): `copy` in its format; `edge_copy` in REST, for the layers a layout keeps unquantised
    (the stack's first and last, `edge` True); `more` for each layer that use_more_bits picks. Ints
    where every format has whole bits, so that sums over many slots stay ints."""

    copy: int | Fraction
    edge_copy: int | Fraction
    more: int | Fraction
    edge: bool


def held_bits(slot: Slot, bits: PartBits) -> int | Fraction:
    """Bits one device holds of `slot`, a part whose copy holds `bits` (part_bits)."""
    n = slot.copies
    if not n:
        return 0
    part, edge = slot.part, 0
    if bits.edge:  # the stack's first and last layers of the slot stay in REST
        depth, where = part.stack.layers, part.group.placement
        edge = sum(where.count_in(part.kind, max(slot.lo, a), min(slot.hi, a + 1)) for a in {0, depth - 1})
    picked = more_bits_layers(part, slot.lo, slot.hi) if bits.more else 0
    return bits.copy * (n - edge) + bits.edge_copy * edge + bits.more * picked


def held_bytes(slot: Slot, bits: PartBits) -> Fraction:
    """Bytes one device holds of `slot`, a part whose copy holds `bits` (part_bits)."""
    return held_bits(slot, bits) / Fraction(8)  # exact: no float


# The bits of one copy of a part, per format and split: the same for every slot of the part, and for every
# part of equal tensors (the attention of many layer kinds), so made once per those, not per slot or kind.
_BITS: dict[tuple, tuple] = {}
_BITS_MAX = 1 << 16


def part_bits(part: Part, weights: str, experts: str | None = None, tensor_parallel: int = 1,
              expert_parallel: int = 1, tied_table: bool = False) -> PartBits:  # fmt: skip
    """The bits of one copy of `part` as slot_bytes stores and splits it: each slot of the part holds them
    times its copies, with its first and last layers and those use_more_bits picks (held_bytes)."""
    key = (part.path, part.role, part.component, part.layered, part.entries, weights, experts, tensor_parallel,
           expert_parallel, tied_table)  # fmt: skip
    try:
        out = _BITS.get(key)
    except TypeError:  # a number archspec.core.tracing records (unhashable): made each time
        out = key = None
    if out is None:
        out = _part_bits(part, weights, experts, tensor_parallel, expert_parallel, tied_table)
        if key is not None:
            if len(_BITS) >= _BITS_MAX:
                _BITS.clear()
            _BITS[key] = out
    copy, edge_copy, more, per_row, edge = out
    if per_row:  # the value rows of a fused attention projection, which the part's spec gives
        v = AttentionShape.of(part.group.spec).v
        more += per_row * (-(-v // tensor_parallel) if tensor_parallel > 1 else v)
    return PartBits(copy, edge_copy, more, edge)


def _part_bits(part: Part, weights: str, experts: str | None, tensor_parallel: int, expert_parallel: int,
               tied_table: bool) -> tuple:  # fmt: skip
    """(PartBits' copy, edge_copy and more, the more bits per value row of a fused attention projection,
    edge) of `part`, from its tensors."""
    from archspec.memory.roles import REST, role_of, weight_plan

    plan = weight_plan(weights)
    x = canonical_format(experts, "--experts") if experts and part.role == "expert" else None
    single = x or plan.single

    def fmt_of(kind: str, role: str) -> str:  # kind: matrix, table, head, vector, router
        if single is None:
            return plan.format(role)
        f = STORAGE[single]
        if not f.quantised:
            return single
        other = {"matrix": None, "table": f.tables, "head": f.head, "vector": f.vectors, "router": f.router}[kind]
        return other or single

    edge = plan.single is None and part.layered and role_of(part) in plan.edge
    t = tensor_parallel
    copy: dict = {}
    edge_copy: dict = {}
    more: dict = {}
    per_row: dict = {}
    for e in part.entries:
        module = module_name(part, e.name)
        copies = getattr(e, "copies", 1)
        for leaf, shape in e.tensors():
            shape = list(shape)
            if copies > 1:  # a stack of routed experts: (copies, n_out[, n_in])
                if part.role == "expert":
                    shape[0] = -(-shape[0] // expert_parallel)
                body = shape[1:]
            else:
                body = shape
            if t > 1 and module in ROW_PARALLEL:
                if leaf == "weight":
                    body[-1] = -(-body[-1] // t)
            elif t > 1 and (module in COLUMN_PARALLEL or module in ("embed", "target_embed", "head")):
                body[0] = -(-body[0] // t)
            stack = shape[0] if copies > 1 else 1
            values = stack * math.prod(body)
            if len(body) == 1:
                kind = "vector"
            elif part.role == "embedding":
                kind = "head" if tied_table and module == "embed" else "table"
            else:
                kind = "head" if part.role == "head" else "router" if part.role == "router" else "matrix"
            fmt = fmt_of(kind, role_of(part, len(body) == 1))
            _tensor_bits(copy, fmt, values, stack, body)
            if edge:
                _tensor_bits(edge_copy, REST, values, stack, body)
            f = STORAGE[fmt]
            more_bits = f.more_bits and kind == "matrix" and leaf == "weight" and part.layered
            if more_bits and module in ("down", "qkv", "kv"):
                extra = STORAGE[f.more_bits].bits - f.bits
                if module == "down":
                    _add(more, values, extra)
                elif part.component in ("attention", "cross_attention"):  # the value rows of the fused projection
                    _add(per_row, shape[-1], extra)
    return _total(copy), _total(edge_copy), _total(more), _total(per_row), edge


def _add(acc: dict, count: int, bits: Fraction | int) -> None:
    """acc += count * bits, exactly, as ints by denominator (a sum of Fractions costs a gcd a term); a
    number archspec.core.tracing records is kept as it is, under None."""
    num, den = (bits, 1) if type(bits) is int else (bits.numerator, bits.denominator)
    if type(count) is int:
        acc[den] = acc.get(den, 0) + count * num
    else:
        acc[None] = acc.get(None, 0) + count * bits


def _total(acc: dict) -> int | Fraction:
    """The sum `_add` kept: an int where it is whole."""
    traced = acc.pop(None, 0)
    whole = acc.pop(1, 0)
    out = sum((Fraction(n, q) for q, n in acc.items()), Fraction(whole))
    out = out.numerator if out.denominator == 1 else out
    return out + traced if not isinstance(traced, int) or traced else out


def _tensor_bits(acc: dict, fmt: str, values: int, stack: int, body: list[int]) -> None:
    """Add the bits of one tensor of `values` values in `fmt` to `acc` (_add), with the scales it stores
    beside each of its `stack` matrices of shape `body`."""
    if len(body) == 2:
        _add(acc, stack * scale_bits(fmt, body[0], body[1]), 1)
    _add(acc, values, STORAGE[fmt].bits)


def _head_tied(spec: ModelSpec) -> bool:
    return spec.head.kind != "none" and spec.tie_embeddings


def stored_weights_bytes(spec: ModelSpec, weights: str = "bf16", experts: str | None = None, tensor_parallel: int = 1,
                         expert_parallel: int = 1, pipeline_parallel: int = 1) -> int:  # fmt: skip
    """Bytes of weights on the largest device, each tensor in its storage format (`weights`: one format
    of STORAGE, a map by role or a layout (archspec.memory.roles); `experts` for the routed experts when
    given), with the scales a format stores, split over tensor, expert and pipeline
    parallel devices."""
    from archspec.memory.roles import canonical_weights, check_roles, weight_plan

    w = canonical_weights(weights)
    check_roles(spec, w)
    x = canonical_format(experts, "--experts") if experts else None
    tied = _head_tied(spec)
    # each part's bits computed once per format and split, and remembered while describing(spec) holds the
    # spec (a layout search asks many degrees of one spec): a slot's bits follow from its part's in O(1),
    # and are summed as ints where every format has whole bits
    from archspec.describe.blocks import held as remembered

    bits = remembered(spec, ("part bits", w, x, tensor_parallel, expert_parallel, tied), dict)

    def held(s: Slot) -> int | Fraction:
        key = id(s.part)  # the parts of a held description stay alive, so their ids stay theirs
        if key not in bits:
            bits[key] = part_bits(s.part, w, x, tensor_parallel, expert_parallel, tied)
        return held_bits(s, bits[key])

    # the stages that differ: fewer where no format picks layers for more bits (use_more_bits)
    plan = weight_plan(w)
    formats = {plan.single, x} if plan.single else {*plan.roles.values(), x}
    more = any(f is not None and STORAGE[f].more_bits for f in formats)
    stages = remembered(spec, ("stage slots", pipeline_parallel, more), lambda: stage_slots(
        spec, pipeline_parallel, [s for s, _ in distinct_stages(spec, pipeline_parallel, more)]))
    return max(math.ceil(sum(held(s) for s in stage) / Fraction(8)) for stage in stages)


def weights_bytes(spec: ModelSpec, dtype: str = "bf16") -> int:
    """All parameters stored in `dtype` (a quantised one as STORAGE says which tensors it holds)."""
    check_args("weights_bytes", spec=spec, dtype=dtype)
    key = canonical_format(dtype, "dtype")
    if not STORAGE[key].quantised:
        return nbytes(count_params(spec).total, dtype_bytes(key))
    return stored_weights_bytes(spec, key)


COLUMN_PARALLEL = ("qkv", "q", "kv", "gate", "up", "q_a", "q_b", "kv_a", "kv_b", "router")
ROW_PARALLEL = ("out", "down")


def rank_elements(spec: ModelSpec, shards: int, tensor_parallel: int = 1) -> int:
    """Parameter elements the largest rank holds: each tensor split `tensor_parallel` ways as
    Megatron-LM splits it, then its dimension 0 split `shards` ways as FSDP2 (ZeRO-3) shards it —
    ceil(rows / shards) rows on the first rank, which every rank pads to."""
    total = 0
    for part in describe(spec):  # one copy of each part times its copies: the cost follows the kinds, not the depth
        key = (part.path, part.entries, shards, tensor_parallel)
        try:
            n = _ELEMENTS.get(key)
        except TypeError:  # numbers archspec.core.tracing records (unhashable): counted each time
            n = key = None
        if n is None:
            n = _rank_part(part, shards, tensor_parallel)
            if key is not None:
                if len(_ELEMENTS) >= _BITS_MAX:
                    _ELEMENTS.clear()
                _ELEMENTS[key] = n
        total += part.copies * n
    return total


_ELEMENTS: dict[tuple, int] = {}  # rank_elements of one copy of a part, by its tensors (as _BITS)


def _rank_part(part: Part, shards: int, tensor_parallel: int) -> int:
    total = 0
    for entry in part.entries:
        for leaf, shape in entry.tensors():
            module = module_name(part, entry.name)
            shape = list(shape)
            if tensor_parallel > 1:
                if module in ROW_PARALLEL:
                    if leaf == "weight":
                        shape[-1] = -(-shape[-1] // tensor_parallel)
                elif module in COLUMN_PARALLEL or module in ("embed", "target_embed", "head"):
                    shape[0] = -(-shape[0] // tensor_parallel)
            shape[0] = -(-shape[0] // shards)
            n = 1
            for s in shape:
                n *= s
            total += n
    return total


@dataclass(frozen=True)
class ParallelLayout:
    """How `gpus` devices split one model: data x tensor x pipeline parallel, with a ZeRO stage."""

    gpus: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int


def parallel_layout(spec: ModelSpec, gpus: int = 1, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                    zero_stage: int = 0) -> ParallelLayout:  # fmt: skip
    """`gpus` split into data-parallel replicas of tensor x pipeline parallel groups, checked against the
    model: tensor parallelism splits heads, key/value heads and the MLP width; each pipeline stage
    needs at least one layer. A layout that cannot be is a SpecError naming the numbers."""
    check_args("parallel_layout", spec=spec)
    for what, n in (("gpus", gpus), ("tensor_parallel", tensor_parallel), ("pipeline_parallel", pipeline_parallel)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise SpecError(f"{what} must be a positive whole number, got {shown(n, 60)}")
    if isinstance(zero_stage, bool) or zero_stage not in ZERO_STAGES:
        raise SpecError(f"zero_stage must be 0, 1, 2 or 3, got {shown(zero_stage, 60)}")
    if gpus % (tensor_parallel * pipeline_parallel):
        raise SpecError(
            f"gpus={gpus} is not divisible by tensor_parallel={tensor_parallel} x pipeline_parallel={pipeline_parallel}"
        )
    check_split(spec, tensor_parallel, pipeline_parallel)
    return ParallelLayout(gpus, gpus // (tensor_parallel * pipeline_parallel), tensor_parallel, pipeline_parallel,
                          zero_stage)  # fmt: skip


def check_split(spec: ModelSpec, tensor_parallel: int, pipeline_parallel: int) -> None:
    """Tensor parallelism t splits query heads, key/value heads and d_ff t ways (Megatron-LM's column
    and row split); pipeline parallelism p needs at least p layers."""
    if tensor_parallel > 1:
        from archspec.spec.layers import kind_specs

        for k in kind_specs(spec):  # every kind's widths (Gemma 4: other heads on its global layers)
            for what, n in (("n_heads", k.n_heads), ("n_kv_heads", k.n_kv_heads), ("d_ff", k.d_ff)):
                if n % tensor_parallel:
                    raise SpecError(
                        f"tensor_parallel={tensor_parallel} does not divide {what}={n} of {spec.name}; "
                        f"tensor parallelism splits {what} evenly across devices"
                    )
    if pipeline_parallel > spec.n_layers:
        raise SpecError(
            f"pipeline_parallel={pipeline_parallel} is more stages than {spec.name} has layers ({spec.n_layers}); "
            "each stage needs at least one layer"
        )
    per = -(-spec.n_layers // pipeline_parallel)  # stage_slots' k: each stage holds ceil(layers / p)
    if -(-spec.n_layers // per) < pipeline_parallel:
        raise SpecError(
            f"pipeline_parallel={pipeline_parallel} leaves {pipeline_parallel - -(-spec.n_layers // per)} stages of "
            f"{spec.name} without a layer ({spec.n_layers} layers at {per} a stage fill {-(-spec.n_layers // per)}); "
            "each stage needs at least one layer"
        )


def check_layout(spec: ModelSpec, layout) -> None:
    """Refuse, by name, a layout the model cannot be split into: tensor parallelism splits query heads,
    key/value heads (latent attention: heads only) and the MLP widths; expert parallelism splits the
    routed experts; pipeline parallelism needs a layer per stage. `layout`: archspec.plan.inference.Layout."""
    from archspec.spec.layers import moe_specs

    for what, n in (("tensor_parallel", layout.tensor_parallel), ("expert_parallel", layout.expert_parallel),
                    ("pipeline_parallel", layout.pipeline_parallel)):  # fmt: skip
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise SpecError(f"{what} must be a positive whole number, got {n!r}")
    check_split(spec, layout.tensor_parallel, layout.pipeline_parallel)
    t, e = layout.tensor_parallel, layout.expert_parallel
    moes = [k.mlp for k in moe_specs(spec)]
    for m in moes if t > 1 else ():
        for what, n in (("mlp.d_expert", m.d_expert), ("mlp.d_shared", m.d_shared)):
            if n and n % t:
                raise SpecError(f"tensor_parallel={t} does not divide {what}={n} of {spec.name}")
    if e > 1:
        if not moes:
            raise SpecError(f"expert_parallel={e}: {spec.name} has no routed experts to spread")
        for m in moes:
            if m.experts % e:
                raise SpecError(
                    f"expert_parallel={e} does not divide mlp.experts={m.experts} of {spec.name}; "
                    "expert parallelism puts the same number of experts on every device"
                )
