"""The adapter engine: how a Hugging Face ``config.json`` maps onto the spec, without torch or transformers.

One declarative adapter per ``model_type`` (a ``Family``), all in ``FAMILIES``. An adapter says

- which config keys it reads and the spec field each one becomes (``fields``),
- the defaults that transformers' config class of that type applies to missing keys (``defaults``,
  copied from ``transformers/models/<type>/configuration_<type>.py``, transformers 5.24), and the
  other names a key goes by (``aliases``: the class's ``attribute_map`` and legacy keys),
- the spec values every model of the family shares (``fixed``: norm, norm position, positions,
  biases, block layout),
- the keys it refuses when they hold a shape- or computation-changing value that the spec cannot
  represent (``refuse``), each with the reason,
- small functions for the fields that need arithmetic (``derive``: rotary fractions, MoE widths),
- the classes of ``architectures`` it counts, by suffix: ``...ForCausalLM`` has an output head,
  ``...Model`` none (a pooler where the class has one), ``...ForMaskedLM`` a masked-LM head,
  ``...ForPreTraining`` the family's pre-training head (ELECTRA's discriminator: one logit per token).

Keys that do not change the architecture (dropout, token ids, dtype, ``use_cache``,
``rope_scaling``, quantisation) are ignored. Adding a family is one entry here plus its test
against transformers' own model (tests/test_hf.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.core.vocab import hf_activations

Config = Mapping[str, Any]


# ---------------------------------------------------------------- activations

# transformers' ACT2FN names -> the spec's activation, for a plain MLP and for a gated one
# (archspec.core.vocab.ACTIVATIONS)
PLAIN_ACTIVATIONS = hf_activations(gated=False)
GATED_ACTIVATIONS = hf_activations(gated=True)


def activation(cfg: Config, key: str, gated: bool, where: str) -> str:
    name = cfg[key]
    table = GATED_ACTIVATIONS if gated else PLAIN_ACTIVATIONS
    if name not in table:
        raise SpecError(f"{where}: {key}={shown(name)} is not supported; supported: {', '.join(sorted(table))}")
    return table[name]


# ---------------------------------------------------------------- refusals


class NotANumber(Exception):
    """A key the adapter reads as a number holds something else (a string such as "64"): refused by name."""

    def __init__(self, key: str, value: Any):
        super().__init__(key, value)
        self.key, self.value = key, value


def quoted_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def check_numbers(family: Family, cfg: Config) -> None:
    """Refuse text where the adapter reads a number: any string in a key that becomes a numeric spec field,
    and a number in quotes in a key transformers' class defaults to a number or to None (a key such as
    Exaone's sliding_window_pattern may hold a number or a pattern of letters; num_key_value_heads, None
    by default, a number)."""
    fields = {key for f, key in family.fields.items() if f != "bias"}
    numbers = {
        k for k, v in family.defaults.items() if v is None or isinstance(v, int | float) and not isinstance(v, bool)
    }
    for key in fields | numbers:
        value = cfg.get(key)
        if isinstance(value, str) and (key in fields or quoted_number(value)):
            raise NotANumber(key, value)
        if key in fields and isinstance(value, bool | list | dict):  # a number's key holding another kind of value
            raise NotANumber(key, value)


@dataclass(frozen=True)
class Refusal:
    """A key whose value must pass `ok` (given the whole config); otherwise the file is refused."""

    key: str
    ok: Callable[[Config], bool]
    why: str


def must_be(key: str, value: Any, why: str) -> Refusal:
    return Refusal(key, lambda cfg: cfg.get(key, value) == value, why)


def must_be_falsy(key: str, why: str) -> Refusal:
    return Refusal(key, lambda cfg: not cfg.get(key), why)


def time_step_limit_ok(cfg: Config) -> bool:
    """A Mamba-2 mixer's time_step_limit (the clamp of dt): null, or a pair (min, max) with 0 <= min <= max."""
    limit = cfg.get("time_step_limit")
    if limit is None:
        return True
    pair = isinstance(limit, (list, tuple)) and len(limit) == 2 and all(isinstance(v, (int, float)) for v in limit)
    return pair and 0 <= limit[0] <= limit[1]


def dt_clamp(cfg: Config) -> dict[str, float]:
    """A Mamba-2 mixer's clamp of dt from time_step_limit (null: none, as (0, Infinity)): dt_min, and dt_max
    where it is finite."""
    low, high = cfg.get("time_step_limit") or (0.0, math.inf)
    return {"dt_min": float(low), **({"dt_max": float(high)} if math.isfinite(high) else {})}


def mamba2_of_prefixed_keys(cfg: Config, head_dim: int) -> dict[str, Any]:
    """The Mamba-2 mixer table of a config whose mixer keys are prefixed mamba_ (Granite 4.0-H, Falcon-H1):
    mamba_n_heads heads of head_dim, mamba_d_state, mamba_n_groups, mamba_d_conv, mamba_conv_bias,
    mamba_proj_bias on the in-projection, and the dt clamp."""
    return {"kind": "mamba2", "heads": cfg["mamba_n_heads"], "head_dim": head_dim, "d_state": cfg["mamba_d_state"],
            "groups": cfg["mamba_n_groups"], "d_conv": cfg["mamba_d_conv"], "conv_bias": bool(cfg["mamba_conv_bias"]),
            "bias": bool(cfg["mamba_proj_bias"]), **dt_clamp(cfg)}  # fmt: skip


# ---------------------------------------------------------------- heads by class

# suffix of the class name in `architectures` -> what the class puts on top of the stacks
HEAD_SUFFIXES = {
    "ForCausalLM": "lm",
    "LMHeadModel": "lm",
    "ForConditionalGeneration": "lm",
    "MTModel": "lm",
    "ForMaskedLM": "mlm",
    "ForPreTraining": "pretraining",  # the family's `pretraining` head (ELECTRA's discriminator)
    "EncoderModel": "encoder",
    "Model": "none",
}


@dataclass(frozen=True)
class Family:
    """How one transformers `model_type` maps onto the spec."""

    model_type: str
    prefix: str  # class-name prefix: "Llama" for LlamaForCausalLM, LlamaModel
    classes: tuple[str, ...]  # suffixes it counts, the first is the default when `architectures` is absent
    fields: dict[str, str]  # spec field <- config key
    defaults: dict[str, Any]  # transformers' config-class defaults for missing keys
    fixed: dict[str, Any] = field(default_factory=dict)  # spec values of every model of the family
    aliases: dict[str, str] = field(default_factory=dict)  # other name -> config key
    refuse: tuple[Refusal, ...] = ()
    derive: Callable[[Config, str], dict[str, Any]] | None = None  # fields that need arithmetic
    pooler: bool = False  # the bare `...Model` class has a pooler (BERT)
    tie_lm: bool = True  # an LM head's tying follows tie_word_embeddings (else: `derive` decides)
    notes: Callable[[Config, dict[str, Any]], list[str]] | None = None
    pretraining: str | None = None  # the head kind of its ...ForPreTraining class, untied (ELECTRA: "discriminator")

    @property
    def class_names(self) -> list[str]:
        return [self.prefix + s for s in self.classes]


@dataclass(frozen=True)
class Wrapper:
    """A multimodal `model_type` whose `text_config` holds a text model (Gemma 3, Llama 4, ...): archspec
    counts the text model and its output head, not the towers. `head` says where transformers puts the
    head: on the wrapper ("wrapper": its lm_head, tied as the wrapper's tie_word_embeddings says, default
    `tie`), or inside the text model ("text": a ...ForCausalLM tied as the text config says)."""

    model_type: str
    prefix: str  # Gemma3 for Gemma3ForConditionalGeneration
    text_type: str  # the text config's model_type when text_config names none (the config class's default)
    head: str  # "wrapper" or "text"
    tie: bool  # the wrapper config class's tie_word_embeddings default (head = "wrapper")
    towers: str  # what is not counted: "vision tower", "vision and audio towers"


@dataclass(frozen=True)
class Imported:
    """A config read into spec data: the fields an archspec spec file needs, plus what to tell the user."""

    data: dict[str, Any]
    model_type: str
    architecture: str
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------- shared derivations


def rope(cfg: Config, default_theta: float = 10000.0, default_fraction: float = 1.0, **extra: Any) -> dict[str, Any]:
    """The rotary sub-table: transformers 5 reads `rope_parameters` (or `rope_scaling`) first, then the flat
    `rope_theta` / `partial_rotary_factor` keys, then the class defaults. Scaling types (llama3, yarn,
    longrope) change the frequencies only and are not represented."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(params, dict):
        params = {}
    theta = params.get("rope_theta", cfg.get("rope_theta", default_theta))
    fraction = params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", default_fraction))
    for key, value in (("rope_theta", theta), ("partial_rotary_factor", fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise NotANumber(key, value)
    table: dict[str, Any] = {"kind": "rotary", "base": float(theta)}
    if fraction != 1.0:
        table["fraction"] = float(fraction)
    table.update(extra)
    return table


def biases(qkv: bool, out: bool, mlp: bool) -> bool | dict[str, bool]:
    """The spec's bias field: one bool when every projection agrees, else the per-projection table."""
    qkv, out, mlp = bool(qkv), bool(out), bool(mlp)
    return qkv if qkv == out == mlp else {"qkv": qkv, "out": out, "mlp": mlp}


def gated_mlp(act_key: str = "hidden_act") -> Callable[[Config, str], dict[str, Any]]:
    return lambda cfg, where: {"activation": activation(cfg, act_key, True, where)}


def plain_mlp(act_key: str) -> Callable[[Config, str], dict[str, Any]]:
    return lambda cfg, where: {"activation": activation(cfg, act_key, False, where)}


def combine(*parts: Callable[[Config, str], dict[str, Any]]) -> Callable[[Config, str], dict[str, Any]]:
    def derive(cfg: Config, where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for part in parts:
            out.update(part(cfg, where))
        return out

    return derive


def ff(key: str, hidden: str, factor: int = 4) -> Callable[[Config, str], dict[str, Any]]:
    """d_ff from a key that may be null, defaulting to factor * hidden (GPT-2's n_inner)."""
    return lambda cfg, where: {"d_ff": cfg.get(key) or factor * cfg[hidden]}


def head_dim(cfg: Config, where: str) -> dict[str, Any]:
    """An explicit head_dim (q width nh * head_dim may differ from hidden_size)."""
    return {"d_head": cfg["head_dim"]} if cfg.get("head_dim") else {}


def head_dim_or_quotient(cfg: Config, where: str) -> dict[str, Any]:
    """getattr(config, "head_dim", hidden_size // num_attention_heads): the quotient rounded down where the
    config class has no head_dim field (GLM-4.5, OLMo 2)."""
    return {"d_head": cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]}


def kv_heads(cfg: Config, where: str) -> dict[str, Any]:
    return {"n_kv_heads": cfg["num_key_value_heads"]} if cfg.get("num_key_value_heads") else {}


def window(key: str = "sliding_window") -> Callable[[Config, str], dict[str, Any]]:
    """A sliding window on every layer (Mistral, Phi-3, StarCoder2); null means full attention."""
    return lambda cfg, where: {"mixer": {"kind": "standard", "sliding_window": cfg[key]}} if cfg.get(key) else {}


# ---------------------------------------------------------------- per-layer kinds

_SUBTABLE_DEFAULTS = {"mixer": "standard", "mlp": "dense", "position": "rotary"}


def _merge_table(base: Any, override: Any) -> Any:
    """A sub-table with a kind's changes folded in (a single-kind model has no [kinds])."""
    if not isinstance(override, dict):
        return override
    table = {"kind": base} if isinstance(base, str) else dict(base or {})
    table.setdefault("kind", override.get("kind"))
    if "kind" in override and override["kind"] != table["kind"]:
        return dict(override)
    return {**table, **override}


def place(data: dict[str, Any], per_layer: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Spec fields for a stack whose layer i is of kind per_layer[i] = (name, overrides of the model's
    fields): the [kinds] and the compact [layers] pattern, or, when every layer is alike, the one
    kind's overrides folded into the model's fields (`data`: what the adapter has so far)."""
    from archspec.spec.layers import compact

    kinds = dict(per_layer)
    if len(kinds) == 1:
        (overrides,) = kinds.values()
        out = {}
        for key, value in overrides.items():
            base = data.get(key, _SUBTABLE_DEFAULTS.get(key)) if key in _SUBTABLE_DEFAULTS else None
            out[key] = _merge_table(base, value) if key in _SUBTABLE_DEFAULTS else value
        return out
    prefix, pattern = compact([name for name, _ in per_layer])
    return {"kinds": kinds, "layers": {"prefix": prefix, "pattern": pattern}}


def _table(value: Any) -> dict[str, Any]:
    return {"kind": value} if isinstance(value, str) else dict(value)


def _override(base: Any, value: Any) -> Any:
    """A kind's change of one field as the spec applies it: a sub-table naming another kind replaces the
    model's, one naming none (or the same kind) changes the fields it names."""
    if base is None or not isinstance(base, (str, dict)) or not isinstance(value, (str, dict)):
        return value
    new, old = _table(value), _table(base)
    return new if new.get("kind", old.get("kind")) != old.get("kind") else {**old, **new}


def layered(per_layer: list[str], kinds: dict[str, dict[str, Any]], base: dict[str, Any]) -> dict[str, Any]:
    """Spec data for a stack whose layer i has kind per_layer[i]: `kinds` maps each name to the fields it
    changes in `base` (the model's defaults). One kind only: its changes are the model's fields."""
    from archspec.spec.layers import compact
    from archspec.spec.model import SUBTABLES

    used = list(dict.fromkeys(per_layer))
    if len(used) == 1:
        out = dict(base)
        for f, value in kinds[used[0]].items():
            out[f] = _override(base.get(f), value) if f in SUBTABLES else value
        return out
    prefix, pattern = compact(per_layer)
    layers: dict[str, Any] = {"pattern": pattern}
    if prefix:
        layers["prefix"] = prefix
    return {**base, "kinds": {k: kinds[k] for k in used}, "layers": layers}


def layer_types(cfg: Config, default: list[str]) -> list[str]:
    """A config's `layer_types` (one attention type per layer), or the list its config class derives."""
    types = cfg.get("layer_types")
    if types is None:
        return default
    if not isinstance(types, list) or len(types) != cfg["num_hidden_layers"]:
        raise TypeError(f"layer_types must list one type per layer ({cfg['num_hidden_layers']})")
    return list(types)
