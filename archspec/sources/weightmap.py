"""Weight maps as tables, without torch: the rows that name another implementation's tensors for the
reference model's parameters, and their expansion over a spec's tensors.

The tables themselves live beside the families they serve (archspec.reference.families, each
``Checkpoint``'s ``weights``); archspec.reference.weights loads tensors by them. Here they are
types and names only, so that `archspec check` reads a checkpoint's names against a spec without
torch. Placeholders: ``{}`` the layer index, ``{w}`` each parameter of the target module (weight,
bias), ``{e}`` (sources only) the expert index of a stacked (E, out, in) target.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

LAYER, PARAM, EXPERT = "{}", "{w}", "{e}"

# The transforms of archspec.reference.weights.TRANSFORMS, by name (a test holds the two lists equal).
TRANSFORM_NAMES = (
    "copy",
    "tied",
    "transpose",
    "cat",
    "split",
    "heads",
    "q_gate",
    "plus_one",
    "stack",
    "io",
    "interleaved",
    "split_io",
)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Row:
    """Source key pattern(s) -> reference parameter path(s), through a transform."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    transform: str = "copy"

    def __post_init__(self):
        if self.transform not in TRANSFORM_NAMES:
            raise ValueError(f"unknown transform {self.transform!r}; use one of {', '.join(TRANSFORM_NAMES)}")


def row(source: str | tuple[str, ...], target: str | tuple[str, ...], transform: str = "copy") -> Row:
    return Row(
        (source,) if isinstance(source, str) else source, (target,) if isinstance(target, str) else target, transform
    )


def each(pattern: str, *names: str) -> tuple[str, ...]:
    """'attn.{x}_proj.{w}', 'q', 'k', 'v' -> the three patterns (the sources a `cat` row fuses)."""
    return tuple(pattern.replace("{x}", n) for n in names)


@dataclass(frozen=True)
class WeightMap:
    """One family's table in one layout. `strip`: prefixes a wrapping model puts on its keys ('model.',
    'transformer.'), removed first; `ignore`: patterns (regular expressions) of keys that hold no
    weights (buffers kept by older versions)."""

    name: str
    rows: tuple[Row, ...]
    strip: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One row at one layer and parameter: concrete keys and paths."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    transform: str


def _fill(pattern: str, layer: int | None, param: str | None) -> str:
    if layer is not None:
        pattern = pattern.replace(LAYER, str(layer))
    return pattern.replace(PARAM, param) if param is not None else pattern


def _children(paths: Iterable[str], prefix: str) -> list[str]:
    """The next name after `prefix.` in `paths`, each once, in order of first appearance."""
    out: dict[str, None] = {}
    for p in paths:
        if p.startswith(prefix + "."):
            out[p[len(prefix) + 1 :].split(".")[0]] = None
    return list(out)


def expand(wmap: WeightMap, shapes: Mapping[str, Shape]) -> list[Step]:
    """Every row expanded over the layers and parameters that `shapes` (reference parameter path ->
    shape) holds, as archspec.reference.weights.plan does over a built model. A row whose targets are
    all absent is skipped; one that writes several targets needs them all."""
    steps = []
    for r in wmap.rows:
        first = r.target[0]
        layers: Sequence[int | None] = [None]
        if LAYER in first:
            stack = first.split("." + LAYER)[0]
            layers = sorted(int(c) for c in _children(shapes, stack) if c.isdigit())
        for i in layers:
            names: Sequence[str | None] = [None]
            if PARAM in first:
                owner = _fill(first.split("." + PARAM)[0], i, None)
                names = [c for c in _children(shapes, owner) if f"{owner}.{c}" in shapes]
            for w in names:
                targets = tuple(_fill(t, i, w) for t in r.target)
                present = [t in shapes for t in targets]
                if not any(present):
                    continue
                if not all(present):
                    missing = next(t for t, p in zip(targets, present, strict=True) if not p)
                    raise ValueError(
                        f"{wmap.name}: the spec has no {missing!r} (a row of the table writes "
                        f"{', '.join(targets)} together)"
                    )
                sources: list[str] = []
                for s in r.source:
                    s = _fill(s, i, w)
                    experts = shapes[targets[0]][0] if EXPERT in s else 0
                    sources += [s.replace(EXPERT, str(e)) for e in range(experts)] if experts else [s]
                steps.append(Step(tuple(sources), targets, r.transform))
    return steps


def _differs(a: Shape, b: Shape) -> int:
    """The dimension along which a fused shape and one of its parts differ (0 where none does)."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), 0)


def _io(s: Shape) -> Shape:
    return s if len(s) < 3 else (*s[:-2], s[-1], s[-2])


def shapes_after(transform: str, sources: list[Shape], targets: list[Shape]) -> list[Shape] | None:
    """The shapes a transform makes of the sources' shapes (as archspec.reference.weights.TRANSFORMS
    makes tensors), or None where the sources do not divide into the targets."""
    if transform in ("copy", "tied", "plus_one", "heads"):
        return list(sources)
    if transform == "transpose":
        return [tuple(reversed(s)) for s in sources]
    if transform in ("cat", "q_gate"):
        dim = _differs(sources[0], targets[0]) if transform == "cat" else 0
        rest = {s[:dim] + s[dim + 1 :] for s in sources}
        if len(rest) != 1 or any(len(s) <= dim for s in sources):
            return None
        s0 = sources[0]
        return [(*s0[:dim], sum(s[dim] for s in sources), *s0[dim + 1 :])]
    if transform == "split":
        dim = _differs(sources[0], targets[0])
        whole = sum(t[dim] for t in targets) if all(len(t) > dim for t in targets) else None
        if len(sources[0]) <= dim or whole != sources[0][dim]:
            return None
        return [(*sources[0][:dim], t[dim], *sources[0][dim + 1 :]) for t in targets]
    if transform == "stack":
        if len(set(sources)) != 1:
            return None
        return [(len(sources), *sources[0])]
    if transform == "io":
        return [_io(s) for s in sources]
    if transform in ("interleaved", "split_io"):
        s, n = sources[0], len(targets)
        if not s or s[-1] % n:
            return None
        return [_io((*s[:-1], s[-1] // n))] * n
    raise ValueError(f"unknown transform {transform!r}")
