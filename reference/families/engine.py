"""The engine of the checkpoint table: what a transformers class can represent, and its config from a spec.

A ``Checkpoint`` is the spec -> config direction of one adapter of archspec.hf (the same ``model_type``),
plus the weights. The adapter's table is read backwards for the plain key maps: each of its ``fields``
(spec field <- config key) is written back as the spec field's value, and its ``fixed`` values are
what every spec of the family must have (each one a need, a sub-table's every member with it). A
checkpoint entry adds only what the reverse direction needs beyond that: spec fields whose values the
config cannot express, relations between fields, the config keys that need arithmetic (or that the
adapter reads inside a derivation), and the weight maps (archspec.reference.weights).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from archspec.sources.weightmap import WeightMap
from archspec.spec.layers import layer_kinds
from archspec.spec.model import SUBTABLES, Biases, ModelSpec

if TYPE_CHECKING:
    from archspec.hf import Family

# ---------------------------------------------------------------- what a family can represent

_ABSENT = object()
NON_GATED = ("relu", "gelu", "silu")
GATED = ("swiglu", "geglu")
ACT = {"relu": "relu", "gelu": "gelu", "silu": "silu", "swiglu": "silu", "geglu": "gelu"}  # ACT2FN names (exact GELU)


def _get(spec: ModelSpec, name: str):
    """A field as families compare it: a flat field as written (a sub-table by its shorthand), or a
    dotted path into a sub-table ('mixer.qk_norm', 'bias.qkv'); absent where the member has none."""
    if "." not in name:
        if name not in type(spec).model_fields:  # a derived view such as kind
            return getattr(spec, name)
        return spec.model_dump(include={name})[name]
    first, *rest = name.split(".")
    value = spec.biases if first == "bias" else getattr(spec, first)
    for part in rest:
        if not hasattr(value, part):
            return _ABSENT
        value = getattr(value, part)
    return value


def _show(name: str, value) -> str:
    """A flat field or a member's kind as Python writes it; a sub-table's field as the spec file does."""
    if "." not in name or name.endswith(".kind"):
        return repr(value)
    if hasattr(value, "model_dump"):  # a member that is itself a sub-table (mixer.ssm)
        value = value.model_dump(exclude_defaults=True) | {"kind": value.kind}
    return "absent" if value is None else json.dumps(value)


@dataclass(frozen=True)
class Need:
    """A spec field (or a dotted path into a sub-table) and the values a family can express (or a
    function of the spec giving them). A member's kind is named by its field: 'head', not 'head.kind'."""

    name: str
    allowed: tuple | Callable[[ModelSpec], tuple]
    why: str = ""

    def problem(self, spec: ModelSpec) -> str | None:
        value = _get(spec, self.name)
        allowed = self.allowed(spec) if callable(self.allowed) else self.allowed
        if value is _ABSENT or value in allowed:
            return None
        why = self.why or "needs " + " or ".join(_show(self.name, a) for a in allowed)
        return f"{self.name.removesuffix('.kind')}={_show(self.name, value)} ({why})"


def fixed_needs(fixed: Mapping[str, Any]) -> dict[str, tuple]:
    """An adapter's fixed values as needs: a flat field has its value; a sub-table is the member the value
    names, every field of it (defaults included, as the adapter writes it); `bias` each projection's."""
    out: dict[str, tuple] = {}
    for name, value in fixed.items():
        if name == "bias":
            table = value if isinstance(value, dict) else dict.fromkeys(Biases.model_fields, value)
            out.update({f"bias.{k}": (v,) for k, v in Biases.model_validate(table).model_dump().items()})
        elif name in SUBTABLES:
            table = {"kind": value} if isinstance(value, str) else value
            member = SUBTABLES[name][table["kind"]].model_validate(table)
            out.update({f"{name}.{k}": (getattr(member, k),) for k in type(member).model_fields})
        else:
            out[name] = (value,)
    return out


# Relations between fields: each returns why the family cannot represent the spec, or None.


def mha(s: ModelSpec) -> str | None:
    ok = s.n_kv_heads == s.n_heads
    return None if ok else f"n_kv_heads={s.n_kv_heads} (needs n_kv_heads = n_heads = {s.n_heads})"


def heads_span_d_model(s: ModelSpec) -> str | None:
    ok = s.d_head * s.n_heads == s.d_model
    return None if ok else f"d_head={s.d_head} (needs n_heads * d_head = d_model = {s.d_model})"


def d_value_is_d_head(s: ModelSpec) -> str | None:
    return None if s.d_value == s.d_head else f"d_value={s.d_value} (needs d_value = d_head = {s.d_head})"


def embedding_is_d_model(s: ModelSpec) -> str | None:
    d = s.embedding.d_embed
    return None if d in (None, s.d_model) else f"embedding.d_embed={d} (needs d_model)"


def one_attention_bias(s: ModelSpec) -> str | None:
    b = s.biases
    return None if b.qkv == b.out else f"bias qkv={b.qkv}, out={b.out} (one attention_bias sets both)"


def one_bias(s: ModelSpec) -> str | None:
    b = s.biases
    ok = b.qkv == b.out == b.mlp
    return None if ok else f"bias qkv={b.qkv}, out={b.out}, mlp={b.mlp} (one enable_bias sets all three)"


def scale(s: ModelSpec) -> float:
    """The score scale the spec computes with (1/sqrt(d_head) unless mixer.scale says otherwise)."""
    value = getattr(s.mixer, "scale", None)
    return s.d_head**-0.5 if value is None else value


def default_scale(s: ModelSpec) -> str | None:
    ok = abs(scale(s) - s.d_head**-0.5) <= 1e-12 * scale(s)
    return None if ok else f"mixer.scale={scale(s)!r} (needs 1/sqrt(d_head))"


# ---------------------------------------------------------------- per-layer views


def layer_specs(s: ModelSpec) -> list[ModelSpec]:
    """The spec each decoder layer sees."""
    return [k for _, k in layer_kinds(s, s.decoder_layers)]


def mixer(s: ModelSpec, kind: str):
    """The first layer's mixer of `kind` (its fields configure every such layer), or None."""
    return next((k.mixer for k in layer_specs(s) if k.mixer.kind == kind), None)


def dense_kind(s: ModelSpec) -> ModelSpec | None:
    return next((k for k in layer_specs(s) if k.mlp.kind == "dense"), None)


def moe(s: ModelSpec):
    return next((k.mlp for k in layer_specs(s) if k.mlp.kind == "moe"), None)


def layer_windows(s: ModelSpec) -> list[int | None]:
    """Each decoder layer's sliding window (None: full attention), as its kind says."""
    return [k.mixer.sliding_window if k.mixer.kind == "standard" else None for k in layer_specs(s)]


def layer_types(s: ModelSpec) -> list[str]:
    return ["sliding_attention" if w else "full_attention" for w in layer_windows(s)]


def window(s: ModelSpec) -> int | None:
    """The window of the windowed layers (`one_window` holds one for all of them); None where none has one."""
    return next(filter(None, layer_windows(s)), None)


def one_window(s: ModelSpec) -> str | None:
    windows = sorted(set(layer_windows(s)) - {None})
    return None if len(windows) <= 1 else f"mixer.sliding_window: {windows} (one sliding_window for all layers)"


def gemma4_moe(s: ModelSpec) -> str | None:
    """Gemma 4's MoE options, which no family here builds: refused by every one."""
    for k in layer_specs(s):
        m = k.mlp
        if m.kind == "moe" and (m.d_dense or m.router_norm or m.expert_scales):
            return "mlp.d_dense, mlp.router_norm, mlp.expert_scales (Gemma 4's MoE: no family here builds them)"
    return None


def input_weighting(s: ModelSpec) -> str | None:
    """Llama 4's routing weights on the experts' inputs: only a family that says it builds them does."""
    if any(k.mlp.kind == "moe" and k.mlp.weight_input for k in layer_specs(s)):
        return "mlp.weight_input=true (routing weights on the experts' inputs: Llama 4's family only)"
    return None


# Options of a layer that only some transformers classes build: option -> (the description, the model_types
# whose checkpoint entry builds it). Every other entry refuses a spec with the option on (off is the spec's own
# default of the field), on any layer kind (a need on a field reads the model's defaults only; layer kinds
# override them).
LAYER_OPTIONS: dict[str, tuple[str, frozenset[str]]] = {
    "mixer.chunk": ("chunked attention (Llama 4)", frozenset({"llama4_text"})),
    "mixer.sinks": ("attention sinks (gpt-oss)", frozenset({"gpt_oss"})),
    "mixer.gate": ("gated attention output (Qwen3-Next)", frozenset({"qwen3_next"})),
    "mixer.shared_kv": ("keys serving as values (Gemma 4)", frozenset()),
    "mixer.value_norm": ("a norm over each value head (Gemma 4)", frozenset()),
    "mixer.ssm": ("a Mamba-2 mixer beside attention (Falcon-H1)", frozenset()),
    "position.per_layer": ("a relative bias table in every layer (umT5)", frozenset()),
    "position.proportional": ("proportional rotary (Gemma 4)", frozenset()),
    "attention_norm": ("a layer without a norm before its mixer (ModernBERT)", frozenset()),
}


def _off(name: str) -> Any:
    """The spec's default of a flat field or of a sub-table member's field ('mixer.sinks')."""
    if "." not in name:
        return ModelSpec.model_fields[name].default
    table, field_name = name.split(".")
    return next(m.model_fields[field_name].default for m in SUBTABLES[table].values() if field_name in m.model_fields)


def layer_options(model_type: str) -> Callable[[ModelSpec], str | None]:
    """The relation refusing the LAYER_OPTIONS that `model_type`'s class does not build."""
    refused = {k: (_off(k), what) for k, (what, builders) in LAYER_OPTIONS.items() if model_type not in builders}

    def check(s: ModelSpec) -> str | None:
        for k in {id(k): k for k in (s, *layer_specs(s))}.values():
            for name, (off, what) in refused.items():
                value = _get(k, name)
                if value is not _ABSENT and value != off:
                    return f"{name}={_show(name, value)} ({what}: this family does not build it)"
        return None

    return check


# A transformers decoder-only language model; each family changes what it has (where its adapter fixes a
# value, the adapter's value stands)
BASE: dict[str, tuple | Callable | None] = {
    "kind": ("decoder-only",),
    "type_vocab_size": (0,),
    "embedding_norm": (False,),
    "pooler": (False,),
    "embedding_scale": ("none",),
    "share_layers": (False,),
    "norm_position": ("pre",),
    "final_norm": (True,),
    "block.kind": ("sequential",),
    "mixer.kind": ("standard",),
    "mixer.qk_norm": (False,),
    "mixer.softcap": (None,),
    "mixer.sliding_window": (None,),
    "mlp.kind": ("dense",),
    "head.kind": ("lm",),
    "head.bias": (False,),
    "head.scale": (1.0,),
    "head.softcap": (None,),
}
ROTARY = {"position.kind": ("rotary",), "position.fraction": (1.0,), "position.interleaved": (False,)}
LLAMA_LIKE = {**BASE, **ROTARY, "activation": GATED}
# decoders of several mixers: each layer's kind is checked by the family's relation
HYBRID_BASE = {**BASE, "mixer.kind": None, "mixer.qk_norm": None, "mlp.kind": None}

DEC, ENC = "decoder.layers.{}.", "encoder.layers.{}."


def _field(spec: ModelSpec, name: str) -> Any:
    """A spec field as an adapter's config key holds it: `bias` as one flag (the family's needs hold the
    three projections' flags equal where one key sets them)."""
    return spec.biases.qkv if name == "bias" else getattr(spec, name)


# ---------------------------------------------------------------- the entry


@dataclass(frozen=True)
class Checkpoint:
    """One transformers class checked against the reference model: what it represents, its config from a
    spec, its weight maps. The plain key maps are its adapter's (archspec.hf.FAMILIES[model_type]).

    `needs`: spec fields and the values the config can express beyond the adapter's fixed ones (a value
    None drops a need of the base it extends, or of the adapter's fixed values where a relation says it
    better); `relations`: checks between fields. `config`: the keys that need arithmetic or that the
    adapter reads in a derivation, from a spec; a key of the adapter's fields given here overrides it
    (an MoE's intermediate_size is the expert width) and None drops it. `weights`: one map per checkpoint
    layout, transformers 5's first. `suffix`: the class built, one of the adapter's classes (default its
    first). `after`: config attributes set after construction, where the config class overrides what
    it was given (T5 turns gated-gelu into the tanh approximation). `untie`: a head transformers 5 ties
    whatever the config says (T5); a checkpoint with a head of its own unties it on load, and so does
    `transformers_model`. `input_weighting`: the family builds routing weights on the experts' inputs."""

    name: str
    model_type: str
    needs: Mapping[str, tuple | Callable | None]
    relations: tuple[Callable[[ModelSpec], str | None], ...]
    config: Mapping[str, Callable[[ModelSpec], Any] | None]
    weights: tuple[WeightMap, ...]
    suffix: str | None = None
    after: Mapping[str, Callable[[ModelSpec], Any]] = field(default_factory=dict)
    untie: str | None = None
    input_weighting: bool = False

    @property
    def adapter(self) -> Family:
        """The config -> spec direction: archspec.hf's adapter of this model_type."""
        from archspec.hf import FAMILIES

        return FAMILIES[self.model_type]

    @property
    def model_class(self) -> str:
        return self.adapter.prefix + (self.suffix or self.adapter.classes[0])

    @cached_property
    def all_needs(self) -> tuple:
        """The field needs (the adapter's fixed values over the entry's own, but for those it drops), then
        the relations and the checks every family shares."""
        merged = dict(self.needs)
        for name, allowed in fixed_needs(self.adapter.fixed).items():
            if name not in merged or merged[name] is not None:
                merged[name] = allowed
        shared = (gemma4_moe, layer_options(self.model_type)) + (() if self.input_weighting else (input_weighting,))
        return (*(Need(k, v) for k, v in merged.items() if v is not None), *self.relations, *shared)

    def unsupported(self, spec: ModelSpec) -> list[str]:
        """Why this family cannot represent `spec`: one phrase per field (empty: it can)."""
        out = []
        for need in self.all_needs:
            why = need.problem(spec) if isinstance(need, Need) else need(spec)
            if why:
                out.append(why)
        return out

    def config_values(self, spec: ModelSpec) -> dict[str, Any]:
        """The transformers config keys of `spec` (one it represents): the adapter's fields backwards, then
        the entry's own keys."""
        out = {key: _field(spec, name) for name, key in self.adapter.fields.items()}
        for key, get in self.config.items():
            if get is None:
                out.pop(key, None)
            else:
                out[key] = get(spec)
        return out
