"""Weight maps as tables: how another implementation's state dict fills the reference model.

One table per family and layout (litgpt's ``weight_map``): each row maps source key pattern(s) to
reference parameter path(s), with a declared transform. Placeholders:

- ``{}``: the layer index, over the layers of the target's stack (``decoder.layers.{}.mlp.up.weight``);
- ``{w}``: each parameter the target module has (its weight, and its bias where it has one), so one
  row covers a linear or norm layer with or without a bias;
- ``{e}`` (sources only): the expert index, over the experts of a stacked (E, out, in) target.

Transforms (``TRANSFORMS``): ``copy``; ``transpose`` (GPT-2's Conv1D stores (in, out)); ``cat``
(separate q, k, v into the fused qkv); ``split`` (a fused source into several targets, by their
widths); ``heads`` (GPT-NeoX's fused projection holds q, k, v per head: regrouped into all q, all
k, all v); ``q_gate`` (Qwen3-Next's q_proj interleaves q and the output gate per head: with
k_proj and v_proj into [q | gate | k | v]); ``plus_one`` (Gemma's RMSNorm stores w and computes
with 1 + w); ``stack`` (per-expert matrices into one stacked tensor); ``io`` (stacked experts stored
(E, in, out), as ``x @ w`` computes: gpt-oss's and Llama 4's down_proj); ``interleaved`` (gpt-oss's
gate_up_proj (E, d, 2·d_ff) and its bias hold gate and up alternating along the last dimension:
[gate0, up0, gate1, up1, …]); ``split_io`` (Llama 4's gate_up_proj (E, d, 2·d_ff): [gate | up] along
the last dimension); ``tied`` (another name of a
tensor an earlier row writes: it may be absent, and where present it must be equal).

Loading checks both ways: every source tensor is used (but the keys a table declares ``ignore``:
buffers), and every reference parameter is written (a tied one through its owner); a missing,
left-over or misshapen tensor names itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import torch

from archspec.sources.weightmap import EXPERT, LAYER, PARAM, Row, Step, WeightMap, _fill, each, row
from archspec.spec.model import ModelSpec

__all__ = ["EXPERT", "LAYER", "PARAM", "TRANSFORMS", "Row", "Step", "WeightMap", "each", "load_weights", "plan", "row"]


def _differs(a: torch.Tensor, b: torch.Tensor) -> int:
    """The dimension along which a fused tensor and one of its parts differ (0 where none does)."""
    return next((i for i, (x, y) in enumerate(zip(a.shape, b.shape, strict=False)) if x != y), 0)


def _heads(sources: list[torch.Tensor], spec: ModelSpec) -> list[torch.Tensor]:
    """(heads · 3 · d_head, ...) grouped per head as (q_h, k_h, v_h) -> (3 · heads · d_head, ...): all q, k, v."""
    return [s.unflatten(0, (spec.n_heads, 3, -1)).transpose(0, 1).flatten(0, 2) for s in sources]


def _q_gate(sources: list[torch.Tensor], spec: ModelSpec) -> list[torch.Tensor]:
    """Qwen3-Next's q_proj holds per head (q_h, gate_h), each d_head wide, then k_proj, v_proj ->
    the reference's fused [q | gate | k | v] (all q heads, then all gates)."""
    q, *kv = sources
    q, gate = q.unflatten(0, (spec.n_heads, 2, -1)).unbind(1)  # (nh, d_head, ...) each
    return [torch.cat([q.flatten(0, 1), gate.flatten(0, 1), *kv])]


def _io(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Stacked experts stored (E, in, out), as x @ w computes, into the reference's (E, out, in); a
    bias (E, out) as it is."""
    return x if x.dim() < 3 else x.transpose(-1, -2)


Transform = Callable[[list[torch.Tensor], list[torch.Tensor], ModelSpec], list[torch.Tensor]]
TRANSFORMS: dict[str, Transform] = {
    "copy": lambda src, tgt, spec: src,
    "tied": lambda src, tgt, spec: src,
    "transpose": lambda src, tgt, spec: [s.t() for s in src],
    "cat": lambda src, tgt, spec: [torch.cat(src, dim=_differs(src[0], tgt[0]))],
    "split": lambda src, tgt, spec: list(
        torch.split(src[0], [t.shape[_differs(src[0], t)] for t in tgt], dim=_differs(src[0], tgt[0]))
    ),
    "heads": lambda src, tgt, spec: _heads(src, spec),
    "q_gate": lambda src, tgt, spec: _q_gate(src, spec),
    "plus_one": lambda src, tgt, spec: [s + 1 for s in src],
    "stack": lambda src, tgt, spec: [torch.stack(src)],
    "io": lambda src, tgt, spec: [_io(s, t) for s, t in zip(src, tgt, strict=True)],
    "interleaved": lambda src, tgt, spec: [_io(src[0][..., i::2], t) for i, t in enumerate(tgt)],
    "split_io": lambda src, tgt, spec: [_io(x, t) for x, t in zip(src[0].chunk(len(tgt), dim=-1), tgt, strict=True)],
}


def _module(model: torch.nn.Module, path: str) -> torch.nn.Module | None:
    try:
        return model.get_submodule(path)
    except AttributeError:
        return None


def plan(wmap: WeightMap, model: torch.nn.Module) -> list[Step]:
    """Every row expanded over the layers and parameters the reference model has. A row whose targets
    the model lacks is skipped (its sources, if present, are then left over and reported)."""
    params = dict(model.named_parameters(remove_duplicate=False))
    steps = []
    for r in wmap.rows:
        first = r.target[0]
        layers: Sequence[int | None] = [None]
        if LAYER in first:
            stack = _module(model, first.split("." + LAYER)[0])
            layers = range(len(stack)) if stack is not None else []
        for i in layers:
            names: Sequence[str | None] = [None]
            if PARAM in first:
                owner = _module(model, _fill(first.split("." + PARAM)[0], i, None))
                names = [n for n, _ in owner.named_parameters(recurse=False)] if owner is not None else []
            for w in names:
                targets = tuple(_fill(t, i, w) for t in r.target)
                present = [t in params for t in targets]
                if not any(present):
                    continue
                if not all(present):
                    missing = [t for t, p in zip(targets, present, strict=True) if not p]
                    raise ValueError(f"{wmap.name}: the reference model has no {missing[0]!r} (a row of the table "
                                     f"writes {', '.join(targets)} together)")  # fmt: skip
                sources: list[str] = []
                for s in r.source:
                    s = _fill(s, i, w)
                    experts = params[targets[0]].shape[0] if EXPERT in s else 0
                    sources += [s.replace(EXPERT, str(e)) for e in range(experts)] if experts else [s]
                steps.append(Step(tuple(sources), targets, r.transform))
    return steps


def _strip(state_dict: Mapping[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Drop the first of `prefixes` that the keys carry (a wrapped model's 'model.'), where they carry it."""
    for p in prefixes:
        if any(k.startswith(p) for k in state_dict):
            return {k.removeprefix(p): v for k, v in state_dict.items()}
    return dict(state_dict)


def choose(layouts: Sequence[WeightMap], model: torch.nn.Module, state_dict: Mapping[str, torch.Tensor]) -> WeightMap:
    """The layout whose keys the state dict holds most of (transformers 5's, or an older checkpoint's)."""

    def covered(wmap: WeightMap) -> int:
        keys = set(_strip(state_dict, wmap.strip))
        return sum(s in keys for step in plan(wmap, model) for s in step.source)

    return max(layouts, key=covered)  # the first of equals: layouts are listed newest first


@torch.no_grad()
def load_weights(
    model: torch.nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    layouts: WeightMap | Sequence[WeightMap],
    keep: tuple[str, ...] = (),
):
    """Copy `state_dict` into `model` by a table (or the best fitting of several layouts of one family)
    and check both directions. `keep`: module paths whose parameters keep their own weights (parts the
    source does not have, e.g. torch.nn.Transformer's missing embeddings)."""
    wmap = layouts if isinstance(layouts, WeightMap) else choose(layouts, model, state_dict)
    what = wmap.name
    source = _strip(state_dict, wmap.strip)
    ignored = {k for k in source if any(re.fullmatch(p, k) for p in wmap.ignore)}
    params = dict(model.named_parameters(remove_duplicate=False))
    tied = model.tied() if hasattr(model, "tied") else {}
    spec = getattr(model, "spec", None)
    written: set[int] = set()
    used: set[str] = set()
    for step in plan(wmap, model):
        targets = [params[t] for t in step.target]
        # a second name of a tensor another row writes: optional, and equal where present
        alias = step.transform == "tied" or all(t in tied for t in step.target)
        if alias and not all(s in source for s in step.source):
            continue
        absent = [s for s in step.source if s not in source]
        if absent:
            raise ValueError(f"{what}: the state dict has no {absent[0]!r} (for {', '.join(step.target)})")
        tensors = _transform(step, [source[s] for s in step.source], targets, spec, what)
        for path, target, value in zip(step.target, targets, tensors, strict=True):
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(f"{what}: {', '.join(step.source)} has shape {tuple(value.shape)}, the reference "
                                 f"model expects {tuple(target.shape)} for {path}")  # fmt: skip
            if alias:
                if id(target) in written and not torch.equal(value.to(target.dtype), target):
                    raise ValueError(f"{what}: {', '.join(step.source)} differs from {path}, which is the same tensor "
                                     f"in the reference model (tied); the source has its own")  # fmt: skip
                continue
            target.copy_(value)
            written.add(id(target))
        used.update(step.source)
    left = sorted(set(source) - used - ignored)
    if left:
        raise ValueError(f"{what}: {len(left)} tensors were not loaded, e.g. {left[:3]}")
    unwritten = [name for name, p in model.named_parameters() if id(p) not in written and not name.startswith(keep)]
    if unwritten:
        raise ValueError(f"{what}: {len(unwritten)} parameters were not written, e.g. {unwritten[:3]}")
    return model


def _transform(step: Step, sources, targets, spec, what: str) -> list[torch.Tensor]:
    try:
        out = TRANSFORMS[step.transform](sources, targets, spec)
    except (RuntimeError, ValueError) as e:  # a fused tensor that does not divide as the reference model's parts
        shapes = ", ".join(str(tuple(s.shape)) for s in sources)
        raise ValueError(f"{what}: {', '.join(step.source)} has shape {shapes}, which {step.transform!r} cannot "
                         f"make into {', '.join(str(tuple(t.shape)) for t in targets)} ({e})") from None  # fmt: skip
    if len(out) != len(targets):
        raise ValueError(f"{what}: {step.transform!r} gave {len(out)} tensors for {len(targets)} targets")
    return out
