"""A checkpoint's stored tensors held against a spec, tensor by tensor (`archspec check`).

The spec's tensors (its description, by reference path, shape and component) are named as the
checkpoint names them through the family's weight map (archspec.sources.names); each row's stored
tensors must exist and, transformed as loading would transform them, have the spec's shapes. What is
left over is sorted into block scales of a stored weight (FP8: DeepSeek's `weight_scale_inv`, Meta's
and compressed-tensors' `weight_scale`, `input_scale`), buffers the table names, components the spec
does not describe (multi-token-prediction layers past the last layer, vision and audio towers,
projectors: by their first name), and extra tensors.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from archspec.core.errors import SpecError
from archspec.sources.stored import StoredTensor
from archspec.sources.weightmap import WeightMap, expand, shapes_after
from archspec.spec.model import ModelSpec

SCALES = ("weight_scale_inv", "weight_scale", "input_scale")  # FP8 block or tensor scales of `X.weight`
# prefixes of multimodal wrappers' text models (transformers 5's and 4's), removed before a map's own
WRAPPED = {"model.language_model.": "model.", "language_model.model.": "model.", "language_model.": ""}

# stored dtype -> the --weights format that holds a value in the same bits
FORMAT_OF = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F8_E4M3": "fp8", "F8_E5M2": "fp8", "I8": "int8"}


@dataclass(frozen=True)
class Tally:
    tensors: int = 0
    params: int = 0
    bytes: int = 0

    def add(self, t: StoredTensor) -> Tally:
        return Tally(self.tensors + 1, self.params + t.numel, self.bytes + t.nbytes)


@dataclass(frozen=True)
class Misshapen:
    names: tuple[str, ...]
    stored: tuple[tuple[int, ...], ...]
    expected: tuple[tuple[int, ...], ...]  # the spec's, as the stored tensors would be named


@dataclass(frozen=True)
class Matching:
    """How the stored tensors meet the spec's through one layout."""

    layout: str
    matched: int  # spec tensors found with their shapes
    expected: int  # spec tensors
    missing: tuple[str, ...]
    misshapen: tuple[Misshapen, ...]
    component: dict[str, str]  # stored name -> component (the spec's, or a hidden one's)
    scales: tuple[str, ...]
    buffers: tuple[str, ...]
    hidden: dict[str, tuple[str, ...]]  # hidden component -> its stored names
    extra: tuple[str, ...]


@dataclass(frozen=True)
class CheckReport:
    name: str
    source: str
    layout: str
    ok: bool
    missing: tuple[str, ...]
    misshapen: tuple[Misshapen, ...]
    extra: tuple[str, ...]
    hidden: dict[str, Tally]
    scales: Tally
    buffers: Tally
    by_dtype: dict[str, Tally]
    by_component: dict[str, Tally]
    stored: Tally
    spec_params: int
    weights_format: str | None  # the format of most stored values
    predicted_bytes: int | None  # what that --weights format predicts for the spec's tensors
    files: tuple[str, ...] = field(default_factory=tuple)


def _stripped(name: str, wmap: WeightMap) -> str:
    for p, inner in WRAPPED.items():
        if name.startswith(p):
            name = inner + name[len(p) :]
            break
    for p in wmap.strip:
        if name.startswith(p):
            return name[len(p) :]
    return name


def match(spec: ModelSpec, stored: list[StoredTensor], wmap: WeightMap) -> Matching:
    from archspec.describe.blocks import describe
    from archspec.describe.parts import tensors

    spec_tensors = {t.path: t for t in tensors(describe(spec))}
    shapes = {p: t.shape for p, t in spec_tensors.items()}
    if spec.tie_embeddings and "embed.weight" in shapes and "head.weight" not in shapes:
        shapes_tied = {**shapes, "head.weight": shapes["embed.weight"]}  # a stored copy of the tied head is allowed
    else:
        shapes_tied = shapes
    by_key = {_stripped(t.name, wmap): t for t in stored}
    packed = _mxfp4(by_key)
    component: dict[str, str] = {}
    used: set[str] = set()
    missing, misshapen, matched = [], [], 0
    for step in expand(wmap, shapes_tied):
        tied_copy = all(t not in shapes for t in step.target)
        present = [s in by_key for s in step.source]
        if tied_copy and not all(present):
            continue
        if not all(present):
            missing += [s for s, p in zip(step.source, present, strict=True) if not p]
            continue
        src = [by_key[s] for s in step.source]
        want = [shapes_tied[t] for t in step.target]
        got = shapes_after(step.transform, [t.shape for t in src], want)
        used.update(step.source)
        comp = spec_tensors[step.target[0]].component if not tied_copy else "head"
        for t in src:
            component[t.name] = comp
        if got != want:
            misshapen.append(Misshapen(tuple(t.name for t in src), tuple(t.shape for t in src), tuple(want)))
        elif not tied_copy:
            matched += len(step.target)
    left = [t for k, t in by_key.items() if k not in used]
    weights = {t.name: component[t.name] for t in stored if t.name in component}
    scales, buffers, extra = [], [], []
    hidden: dict[str, list[str]] = {}
    layers = spec.decoder_layers or spec.encoder_layers
    for t in left:
        key = _stripped(t.name, wmap)
        base, _, suffix = t.name.rpartition(".")
        group = _hidden(t.name, key, layers)
        if suffix in SCALES and f"{base}.weight" in weights:
            scales.append(t.name)
            component[t.name] = weights[f"{base}.weight"]
        elif key in packed and packed[key] in weights:
            scales.append(t.name)
            component[t.name] = weights[packed[key]]
        elif group is not None:  # a hidden component's tensors, its scales and buffers included
            hidden.setdefault(group, []).append(t.name)
            component[t.name] = group
        elif any(re.fullmatch(p, key) for p in wmap.ignore):
            buffers.append(t.name)
            component[t.name] = "buffers"
        else:
            extra.append(t.name)
            component[t.name] = "extra"
    return Matching(
        wmap.name,
        matched,
        len(spec_tensors),
        tuple(missing),
        tuple(misshapen),
        component,
        tuple(scales),
        tuple(buffers),
        {k: tuple(v) for k, v in hidden.items()},
        tuple(extra),
    )


def _mxfp4(by_key: dict[str, StoredTensor]) -> dict[str, str]:
    """gpt-oss's MXFP4 experts: X_blocks (..., out, in/32, 16 bytes of 32 4-bit values) beside X_scales
    (..., out, in/32, one E8M0 exponent per block) hold the matrix X, which transformers stores (..., in,
    out) as x @ w computes. Each X_blocks is read as X of that shape (its stored name and bytes kept);
    returns X_scales' key -> X_blocks' name, for the scales to be their matrix's."""
    out = {}
    for key, t in list(by_key.items()):
        base = key.removesuffix("_blocks")
        if base != key and t.dtype == "U8" and len(t.shape) >= 3 and t.shape[-1] == 16 and base not in by_key:
            *lead, rows, blocks, _ = t.shape
            by_key[base] = StoredTensor(t.name, (*lead, 32 * blocks, rows), t.dtype, t.nbytes)
            del by_key[key]
            out[f"{base}_scales"] = t.name
    return out


_LAYER = re.compile(r"^(?:.*\.)?layers\.(\d+)\.")


def _hidden(name: str, key: str, layers: int) -> str | None:
    """The component a tensor the spec does not describe belongs to: layers past the last (DeepSeek-V3's
    multi-token-prediction layer 61) or an `mtp` module are 'mtp'; a first name of a tower or projector
    (vision_tower, audio_tower, multi_modal_projector, visual, ...) names its own."""
    m = _LAYER.match(key)
    if m and int(m.group(1)) >= layers and not name.startswith(("vision", "audio", "visual")):
        return "mtp"
    first = name.removeprefix("model.").split(".")[0]
    if first == "mtp" or first.startswith("mtp"):
        return "mtp"
    if re.search(r"vision|visual|audio|image|projector|mm_|speech|video", first):
        return first
    return None


def choose(spec: ModelSpec, stored: list[StoredTensor], layouts: tuple[WeightMap, ...]) -> Matching:
    """The layout under which most of the spec's tensors are found (the first of equals)."""
    return max((match(spec, stored, w) for w in layouts), key=lambda m: m.matched)


def format_values(t: StoredTensor) -> tuple[str, int] | None:
    """The --weights format a stored tensor's values are in and how many values it holds (MXFP4 blocks: two
    4-bit values a byte); None for scales and dtypes no format holds."""
    if t.name.endswith("_blocks") and t.dtype == "U8" and len(t.shape) >= 3 and t.shape[-1] == 16:
        return "mxfp4", 2 * t.numel
    if t.dtype in FORMAT_OF and t.name.rpartition(".")[2] not in SCALES:
        return FORMAT_OF[t.dtype], t.numel
    return None


def dominant_format(stored: list[StoredTensor], component: dict[str, str]) -> str | None:
    """The --weights format of most stored values among the spec's tensors (None where none maps to one)."""
    count: Counter = Counter()
    for t in stored:
        held = format_values(t) if component.get(t.name) not in (None, "extra", "buffers", "mtp") else None
        if held:
            count[held[0]] += held[1]
    return count.most_common(1)[0][0] if count else None


def check(
    spec: ModelSpec,
    stored: list[StoredTensor],
    layouts: tuple[WeightMap, ...],
    source: str,
    files: tuple[str, ...] = (),
) -> CheckReport:
    from archspec.count.params import count_params
    from archspec.memory.parallel import stored_weights_bytes

    m = choose(spec, stored, layouts)
    by_dtype: dict[str, Tally] = {}
    by_component: dict[str, Tally] = {}
    total = Tally()
    hidden = {k: Tally() for k in m.hidden}
    scales, buffers = Tally(), Tally()
    scale_names, buffer_names = set(m.scales), set(m.buffers)
    for t in stored:
        comp = m.component.get(t.name, "extra")
        if t.name in scale_names:  # a row of their own: the components' values are the spec's parameters
            comp = "scales"
        by_dtype[t.dtype] = by_dtype.get(t.dtype, Tally()).add(t)
        by_component[comp] = by_component.get(comp, Tally()).add(t)
        total = total.add(t)
        if comp in hidden:
            hidden[comp] = hidden[comp].add(t)
        if t.name in scale_names:
            scales = scales.add(t)
        if t.name in buffer_names:
            buffers = buffers.add(t)
    from archspec.count.params import COMPONENTS

    order = {c: i for i, c in enumerate(COMPONENTS)}
    by_component = dict(sorted(by_component.items(), key=lambda kv: order.get(kv[0], len(order))))
    fmt = dominant_format(stored, m.component)
    predicted = stored_weights_bytes(spec, weights=fmt) if fmt else None
    ok = not (m.missing or m.misshapen or m.extra or m.hidden)
    return CheckReport(
        spec.name,
        source,
        m.layout,
        ok,
        m.missing,
        m.misshapen,
        m.extra,
        hidden,
        scales,
        buffers,
        by_dtype,
        by_component,
        total,
        count_params(spec).total,
        fmt,
        predicted,
        files,
    )


def plausible(spec: ModelSpec, stored: list[StoredTensor], where: str) -> None:
    """Refuse, without the weight maps, a config and a checkpoint of different models: the spec's token
    table (vocab_size x embedding width) stored under no name, or fewer layers stored than the config has."""
    if not stored:
        return
    from archspec.describe.blocks import describe
    from archspec.describe.parts import tensors

    table = next((t.shape for t in tensors(describe(spec)) if t.path == "embed.weight"), None)
    shapes = {t.shape for t in stored}
    if table is not None and table not in shapes and tuple(reversed(table)) not in shapes:
        near = sorted((t for t in stored if len(t.shape) == 2), key=lambda t: -t.numel)[:1]
        seen = f"; its largest table is {near[0].name} {near[0].shape}" if near else ""
        raise SpecError(
            f"{where}: the config and the checkpoint describe different models: no stored tensor has "
            f"the config's token table shape {table} (vocab_size x d_model){seen}"
        )
    layers = {int(m.group(1)) for t in stored if (m := _LAYER.match(t.name))}
    want = spec.decoder_layers or spec.encoder_layers
    if layers and spec.kind != "encoder-decoder" and max(layers) + 1 < want:
        raise SpecError(
            f"{where}: the config and the checkpoint describe different models: the config has {want} "
            f"layers, the checkpoint stores {max(layers) + 1}"
        )


def stored_head_note(spec: ModelSpec, stored: list[StoredTensor]) -> str | None:
    """A note where the spec ties the output head to the token table but the checkpoint stores an lm_head of
    the table's shape beside it: transformers 5 keeps the two apart where their stored values differ (it ties
    them where they are equal), and archspec reads no values, so it counts the head as the config says."""
    if not spec.tie_embeddings:
        return None
    from archspec.describe.blocks import describe
    from archspec.describe.parts import tensors

    table = next((t.shape for t in tensors(describe(spec)) if t.path == "embed.weight"), None)
    head = next((t for t in stored if t.name.endswith("lm_head.weight") and t.shape == table), None)
    if head is None:
        return None
    return (f"the config ties the output head to the token table, but the checkpoint stores {head.name} "
            f"{head.shape} beside it: transformers 5 loads the two apart where their values differ; archspec "
            "reads no values and counts the head tied (--set tie_embeddings=false counts it separate)")  # fmt: skip
