"""The per-layer view: which kind each layer of a stack has, resolved once from the spec.

A spec places its layer kinds with ``[layers]`` (a prefix, then a repeating pattern); the older
fields are cases of the same view: ``attention.sliding_layers`` (even or odd layers windowed) gives
the kinds ``sliding`` and ``full``, ``mlp.dense_layers`` the kinds ``dense`` (a prefix) and ``moe``;
a spec with neither has one kind, ``layer``. Everything that depends on a layer's kind — the
description (archspec.describe.blocks), hence parameters, FLOPs, memory, and the reference model — reads
this view, never the fields above.

A ``LayerGroup`` is one kind with the spec its layers see and where they are. Its ``count`` and
``first`` cost as much for 10^6 layers as for 10 (they are counted over the pattern, not the
stack); only ``indices`` walks the layers.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
import math
from bisect import bisect_left
from collections.abc import Iterator
from typing import NamedTuple

from archspec.spec.model import DenseMLP, ModelSpec

SINGLE = "layer"  # the one kind of a stack of identical layers


class Placement:
    """Layer i of a `depth`-layer stack has kind runs[...] for the first layers (a run-length list
    of (kind, layers)), then pattern[(i - len(prefix)) % len(pattern)].

    Where each kind sits in the runs and in the pattern is indexed once, on first use (one pass over
    the pattern), so that the questions below cost, per kind, what that kind's own runs and places
    in the pattern cost: asking them of every kind is linear in the pattern, however many kinds it has."""

    __slots__ = ("runs", "pattern", "depth", "_index", "_tail", "_hash", "_kinds")

    def __init__(self, runs: tuple[tuple[str, int], ...], pattern: tuple[str, ...], depth: int) -> None:
        self.runs, self.pattern, self.depth = tuple(runs), tuple(pattern), depth
        self._index: _Index | None = None
        self._tail: tuple | None = None
        self._hash: int | None = None
        self._kinds: list[str] | None = None

    def _key(self) -> tuple:
        return self.runs, self.pattern, self.depth

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Placement) and self._key() == other._key())

    def __hash__(self) -> int:
        if self._hash is None:  # hashed once: a pattern of 10^6 kinds is hashed in milliseconds, not per part
            self._hash = hash(self._key())
        return self._hash

    def __repr__(self) -> str:
        return f"Placement(runs={self.runs!r}, pattern={self.pattern!r}, depth={self.depth!r})"

    @property
    def index(self) -> "_Index":
        if self._index is None:
            self._index = _Index(self.runs, self.pattern)
        return self._index

    @property
    def prefix_len(self) -> int:
        return min(self.index.prefix, self.depth)

    def kind_at(self, i: int) -> str:
        at = 0
        for kind, n in self.runs:
            if i < at + n:
                return kind
            at += n
        return self.pattern[(i - at) % len(self.pattern)]

    def _after_runs(self) -> tuple:
        """(whole patterns, the layers of the last, cut-short one) after the runs, as a stack of `depth` lays
        them out; the second a plain int (it slices the pattern), found by comparisons (at_most)."""
        if self._tail is None:
            left = self.depth - self.index.prefix if self.depth > self.index.prefix else 0
            full, rest = divmod(left, len(self.pattern))
            self._tail = (full, at_most(rest, len(self.pattern)))
        return self._tail

    def count(self, kind: str) -> int:
        """Layers of `kind`, counted over the runs and the pattern (not layer by layer)."""
        out = self.index.in_runs(kind, self.depth)
        full, rest = self._after_runs()
        places = self.index.places.get(kind, ())
        return out + full * len(places) + bisect_left(places, rest)

    def _upto(self, kind: str, x: int) -> int:
        """Layers of `kind` among the first x (0 <= x <= depth, a plain int)."""
        index = self.index
        out = index.in_runs(kind, x)
        if x <= index.prefix:
            return out
        places = index.places.get(kind, ())
        full, rest = divmod(x - index.prefix, len(self.pattern))
        return out + full * len(places) + bisect_left(places, rest)

    def count_in(self, kind: str, lo: int, hi: int, mod: int = 1, res: int = 0) -> int:
        """Layers i of `kind` with lo <= i < hi (and i % mod == res), counted over the runs and the
        pattern's arithmetic progressions, not layer by layer."""
        hi = min(hi, self.depth)
        if mod == 1 and all(type(x) is int for x in (lo, hi, self.depth)):  # plain numbers: by bisection
            return self._upto(kind, hi) - self._upto(kind, max(lo, 0)) if lo < hi else 0
        index, out = self.index, 0
        for at, n in index.runs.get(kind, ()):
            out += _progression(at, 1, min(at + n, self.depth), lo, hi, mod, res)
        period = len(self.pattern)
        for j in index.places.get(kind, ()):
            out += _progression(index.prefix + j, period, self.depth, lo, hi, mod, res)
        return out

    def first(self, kind: str) -> int:
        index = self.index
        runs = index.runs.get(kind)
        return runs[0][0] if runs else index.prefix + index.places[kind][0]

    def kinds(self) -> list[str]:
        """Distinct kinds present in the stack, in order of their first layer (found once)."""
        if type(self.depth) is int:
            if self._kinds is None:
                self._kinds = self._present()
            return list(self._kinds)
        return self._present()

    def _present(self) -> list[str]:
        index = self.index
        _, rest = self._after_runs()
        seen = dict.fromkeys(k for k, _ in self.runs)
        seen.update(dict.fromkeys(k for k, places in index.places.items() if self.depth > index.prefix and (
            self.depth - index.prefix >= len(self.pattern) or places[0] < rest)))  # fmt: skip
        present = [k for k in seen if self.count(k)]
        return sorted(present, key=self.first)

    def indices(self, kind: str) -> Iterator[int]:
        """Every layer of `kind`, in order (walks the layers of that kind only)."""
        for at, n in self.index.runs.get(kind, ()):
            yield from range(at, min(at + n, self.depth))
        period = len(self.pattern)
        offsets = self.index.places.get(kind, [])
        base = self.index.prefix
        while offsets and base < self.depth:
            for j in offsets:
                if base + j >= self.depth:
                    return
                yield base + j
            base += period


class _Index:
    """Where each kind sits: its runs (start, layers) before the pattern, in order, with the layers of the
    runs before each; its places in the pattern (sorted offsets); the runs' length."""

    __slots__ = ("runs", "before", "places", "prefix")

    def __init__(self, runs: tuple[tuple[str, int], ...], pattern: tuple[str, ...]) -> None:
        self.runs: dict[str, list[tuple[int, int]]] = {}
        self.before: dict[str, list[int]] = {}
        at = 0
        for kind, n in runs:
            mine = self.runs.setdefault(kind, [])
            done = self.before.setdefault(kind, [0])
            if mine:
                done.append(done[-1] + mine[-1][1])
            mine.append((at, n))
            at += n
        self.prefix = at
        self.places: dict[str, list[int]] = {}
        for j, kind in enumerate(pattern):
            self.places.setdefault(kind, []).append(j)

    def in_runs(self, kind: str, x: int) -> int:
        """Layers of `kind` in the runs among the first x layers."""
        runs = self.runs.get(kind)
        if not runs:
            return 0
        if type(x) is int:
            i = bisect_left(runs, (x,)) - 1  # the last run that starts before x
            if i < 0:
                return 0
            at, n = runs[i]
            return self.before[kind][i] + min(n, x - at)
        out = 0  # a number archspec.core.tracing records: every comparison is a guard
        for at, n in runs:
            if x > at:
                out += min(n, x - at)
        return out


def at_most(n: int, limit: int) -> int:
    """max(0, min(n, limit)) as a plain int, found by comparing n with 0 .. limit: a depth recorded by
    archspec.core.tracing slices a pattern through comparisons it guards (a slice would read its value)."""
    if type(n) is int:
        return max(0, min(n, limit))
    for i in range(limit):
        if not n > i:
            return i
    return limit


def _progression(start: int, step: int, end: int, lo: int, hi: int, mod: int, res: int) -> int:
    """How many of start, start + step, ... (below `end`) lie in [lo, hi) and are res modulo mod."""
    hi = min(hi, end)
    if hi <= lo or start >= hi:
        return 0
    q_lo = max(0, -(-(lo - start) // step))
    q_hi = -(-(hi - start) // step)  # terms start + step q < hi
    if q_hi <= q_lo:
        return 0
    cycle = mod // math.gcd(step, mod)
    out = 0
    for q0 in range(cycle):
        if (start + step * q0) % mod == res % mod:
            out += (q_hi - 1 - q0) // cycle - (q_lo - 1 - q0) // cycle
    return out


class LayerGroup(NamedTuple):
    """The layers of one kind in one stack: the kind's name, the spec they see, where they are."""

    kind: str
    spec: ModelSpec
    placement: Placement

    @property
    def count(self) -> int:
        return self.placement.count(self.kind)

    @property
    def first(self) -> int:
        return self.placement.first(self.kind)

    def indices(self) -> Iterator[int]:
        return self.placement.indices(self.kind)


def _runs(names: list[str] | tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for k in names:
        if out and out[-1][0] == k:
            out[-1] = (k, out[-1][1] + 1)
        else:
            out.append((k, 1))
    return tuple(out)


def _legacy(spec: ModelSpec, depth: int) -> tuple[Placement, dict[str, ModelSpec]]:
    """The older fields as kinds: even/odd sliding windows ('sliding', 'full'), leading dense layers
    before the experts ('dense', 'moe'); both at once give kinds such as 'dense-sliding'."""
    att, mlp = spec.mixer, spec.mlp
    windows = att.kind == "standard" and bool(att.sliding_window) and att.sliding_layers != "all"
    dense = mlp.dense_layers if mlp.kind == "moe" else 0
    if not windows and not dense:
        return Placement((), (SINGLE,), depth), {SINGLE: spec}

    def name(i: int) -> str:
        labels = []
        if dense:
            labels.append("dense" if i < dense else "moe")
        if windows:
            labels.append("sliding" if (i % 2 == 0) == (att.sliding_layers == "even") else "full")
        return "-".join(labels)

    def spec_of(kind: str) -> ModelSpec:
        update = {}
        if windows:
            update["mixer"] = att.model_copy(update={"sliding_layers": "all"} if kind.endswith("sliding") else
                                                 {"sliding_window": None, "sliding_layers": "all"})  # fmt: skip
        if dense:
            update["mlp"] = DenseMLP.model_construct() if kind.startswith("dense") else mlp.model_copy(
                update={"dense_layers": 0})  # fmt: skip
        return spec.model_copy(update=update)

    prefix = _runs([name(i) for i in range(min(dense, depth))])
    unit = tuple(name(dense + j) for j in range(2 if windows else 1))
    where = Placement(prefix, unit, depth)
    return where, {k: spec_of(k) for k in {*(k for k, _ in prefix), *unit}}


PLACED = "_archspec_placed"  # where a [layers] table keeps its placement by depth (beside its fields)


def placement(spec: ModelSpec, depth: int) -> tuple[Placement, dict[str, ModelSpec]]:
    """Where each kind sits in a stack of `depth` layers, and the spec of each kind. The placement of a
    [layers] table is kept on the table (it lives and goes with it), so that its index is made once, not
    per description."""
    if spec.layers is None:
        return _legacy(spec, depth)
    specs = {name: spec.kind_spec(name) for name in spec.kinds}
    layers = spec.layers
    if type(depth) is not int:  # a depth archspec.core.tracing records
        return Placement(_runs(layers.prefix), layers.pattern, depth), specs
    kept = layers.__dict__.setdefault(PLACED, {})
    held = kept.get(depth)
    # a copy of the table with another prefix or pattern (model_copy copies what it keeps) makes its own
    if held is None or held[0] is not layers.prefix or held[1] is not layers.pattern:
        if len(kept) >= 8:
            kept.clear()
        held = kept[depth] = (layers.prefix, layers.pattern, Placement(_runs(layers.prefix), layers.pattern, depth))
    return held[2], specs


def layer_groups(spec: ModelSpec, depth: int) -> list[LayerGroup]:
    """The distinct kinds of a `depth`-layer stack, each once, in order of their first layer."""
    where, specs = placement(spec, depth)
    return [LayerGroup(k, specs[k], where) for k in where.kinds()]


def kind_specs(spec: ModelSpec) -> list[ModelSpec]:
    """The spec of every distinct kind in any stack (the model's own when every layer is alike)."""
    out: dict[int, ModelSpec] = {}  # by identity: each kind's spec once
    for depth in (spec.encoder_layers, spec.decoder_layers):
        for group in layer_groups(spec, depth) if depth else ():
            out.setdefault(id(group.spec), group.spec)
    return list(out.values())


def moe_specs(spec: ModelSpec) -> list[ModelSpec]:
    """The specs of the kinds whose MLP is a mixture of experts."""
    return [s for s in kind_specs(spec) if s.mlp.kind == "moe"]


def layer_kinds(spec: ModelSpec, depth: int) -> list[tuple[str, ModelSpec]]:
    """Layer by layer: (kind, the spec that layer sees). Walks the stack: for building, not counting."""
    where, specs = placement(spec, depth)
    return [(k, specs[k]) for k in map(where.kind_at, range(depth))]


def compact(kinds: list[str]) -> tuple[list[str], list[str]]:
    """A per-layer list of kinds written as a prefix and the shortest unit that repeats over the rest
    (cut short at the end), the prefix as short as it can be: Gemma 3's 62 layers are
    ([], [local x 5, global]); DeepSeek-V3's are ([dense x 3], [moe]). A prefix and unit of up to
    SHORT layers together are found by whole-stack comparisons (a million layers in milliseconds);
    longer ones by one pass of Knuth-Morris-Pratt over the layers."""
    found = _short_unit(kinds, SHORT)
    start, unit = found if found is not None else _by_periods(kinds)
    return list(kinds[:start]), list(kinds[start : start + unit])


SHORT = 32


def _short_unit(kinds: list[str], limit: int) -> tuple[int, int] | None:
    """(prefix length, unit length) of the compact form when they add up to at most `limit`; else None.

    With one byte per kind, the rest from `start` repeats with unit p exactly when text[i] == text[i + p]
    for every i >= start: the first differing byte from the end of text[:-p] ^ text[p:] gives the least
    such start for every p at once."""
    codes = {k: i for i, k in enumerate(dict.fromkeys(kinds))}
    if len(codes) > 256 or not kinds:
        return None if kinds else (0, 0)
    text = bytes(map(codes.__getitem__, kinds))
    n, best = len(text), None
    for p in range(1, min(limit, n) + 1):
        if best is not None and p > sum(best):  # every later unit is longer than the best whole form
            break
        diff = int.from_bytes(text[: n - p], "big") ^ int.from_bytes(text[p:], "big")
        same = n - p if not diff else ((diff & -diff).bit_length() - 1) // 8  # equal bytes at the end
        form = (n - p - same, p)
        if best is None or sum(form) <= sum(best):  # a tie goes to the longer unit, the shorter prefix
            best = form
    return best if best is not None and sum(best) <= limit else None


def _by_periods(kinds: list[str]) -> tuple[int, int]:
    """(prefix length, unit length) of the compact form, exactly, in one pass: the last m layers repeat
    with period p exactly when the reversed list's first m do, and Knuth-Morris-Pratt's failure function
    gives that period for every m at once; the answer is the least (n - m) + p, the longest m among equals."""
    n = len(kinds)
    best = (n, 0)
    for m, period in enumerate(_periods(kinds[::-1]), start=1):
        if n - m + period <= sum(best):
            best = (n - m, period)
    return best


def _periods(seq: list[str]) -> list[int]:
    """The smallest period of each prefix seq[:m], m = 1..len(seq): m less the longest proper prefix that is
    also a suffix of seq[:m] (the failure function), in one pass."""
    n = len(seq)
    border = [0] * n
    k = 0
    for i in range(1, n):
        item = seq[i]
        while k and item != seq[k]:
            k = border[k - 1]
        if item == seq[k]:
            k += 1
        border[i] = k
    return [m - b for m, b in zip(range(1, n + 1), border)]
