"""Hugging Face ``config.json`` files as specs, without torch or transformers.

One declarative adapter per ``model_type`` (a ``Family``, archspec.hf.engine), grouped by lineage in
the modules of this package (``gpt``, ``llama``, ``qwen``, ``gemma``, ``openai``, ``glm``, ``olmo``,
``minimax``, ``deepseek``, ``t5``, ``seq2seq``, ``encoders``, ``decoders``, ``granite``, ``cohere``,
``qwen_hybrids``, ``hybrids``, ``ernie``); ``FAMILIES`` gathers them. An adapter says which config keys
it reads and the spec field each becomes, transformers' defaults for missing keys (transformers 5.24), the values every
model of the family shares, the keys it refuses by name, small derivations, and the classes of
``architectures`` it counts. Adding a family is one entry in its lineage's module plus its test
against transformers' own model (tests/test_hf.py). Reading files is archspec.io.loading's; this
package maps a config's object onto spec data and never reads a file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from archspec.core.errors import NoAdapter, SpecError, clip, shown
from archspec.hf import (
    cohere,
    decoders,
    deepseek,
    encoders,
    engine,
    ernie,
    gemma,
    glm,
    gpt,
    granite,
    hybrids,
    llama,
    minimax,
    olmo,
    openai,
    qwen,
    qwen_hybrids,
    seq2seq,
    t5,
)
from archspec.hf.engine import HEAD_SUFFIXES, Config, Family, Imported, NotANumber, Wrapper, check_numbers

__all__ = ["CLASSES", "FAMILIES", "WRAPPERS", "Family", "Imported", "Wrapper", "from_mapping", "spec_name"]

LINEAGES = (gpt, llama, qwen, gemma, openai, glm, olmo, minimax, deepseek, t5, seq2seq, encoders, decoders, granite,
            cohere, qwen_hybrids, hybrids, ernie)  # fmt: skip

FAMILIES: dict[str, Family] = {}
for _f in (f for lineage in LINEAGES for f in lineage.FAMILIES):
    if _f.model_type in FAMILIES:  # pragma: no cover - a programming error
        raise RuntimeError(f"family {_f.model_type!r} registered twice")
    FAMILIES[_f.model_type] = _f

WRAPPERS: dict[str, Wrapper] = {w.model_type: w for lineage in LINEAGES for w in getattr(lineage, "WRAPPERS", ())}

# class name -> model_type, for files without model_type (ALBERT's hub files have only `architectures`)
CLASSES: dict[str, str] = {name: f.model_type for f in FAMILIES.values() for name in f.class_names}


# ---------------------------------------------------------------- reading


def spec_name(path: Path) -> str:
    """A spec name from a file or folder name: 'Llama-2-7b-hf/config.json' -> 'llama-2-7b-hf'."""
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    name = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).lstrip("._-")
    return name or "model"


def _supported_types() -> str:
    return ", ".join(sorted(FAMILIES))


def _architecture(raw: dict[str, Any], where: str) -> str | None:
    archs = raw.get("architectures")
    if archs is None or archs == []:
        return None
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise SpecError(f"{where}: architectures must be a list of class names, got {shown(archs)}")
    return archs[0]


def nearest_types(model_type: Any, n: int = 3) -> list[str]:
    """The supported model_types closest in spelling to `model_type` (did-you-mean)."""
    import difflib

    if not isinstance(model_type, str):
        return []
    return difflib.get_close_matches(model_type, sorted(FAMILIES), n=n, cutoff=0.4)


def _family_of(raw: dict[str, Any], where: str, name: str = "") -> tuple[Family, str | None]:
    """The family of a config, and a note when its model_type is an alias: a type archspec has no adapter
    for whose `architectures` names a supported class (Kimi K2's kimi_k2 with DeepseekV3ForCausalLM)."""
    model_type = raw.get("model_type")
    if isinstance(model_type, str) and model_type not in FAMILIES:
        arch = _architecture(raw, where)
        if arch in CLASSES and CLASSES[arch] in FAMILIES:
            family = FAMILIES[CLASSES[arch]]
            note = (f"model_type {model_type!r} has no adapter of its own; its architectures names {arch}, so it is "
                    f"read as {family.model_type} (transformers' defaults of that type fill missing keys)")  # fmt: skip
            return family, note
        if "text_config" not in raw and ("vision_config" in raw or "audio_config" in raw):
            raise SpecError(f"{where}: model_type {model_type!r} has no text model (no text_config) and is not "
                            "supported; archspec counts text models")  # fmt: skip
    if model_type is None:
        arch = _architecture(raw, where)
        if arch in CLASSES:
            return FAMILIES[CLASSES[arch]], None
        raise SpecError(
            f"{where}: no model_type, and architectures {shown(raw.get('architectures'))} names no supported "
            f"class; supported model_types: {_supported_types()}"
        )
    if not isinstance(model_type, str):
        raise SpecError(f"{where}: model_type {shown(model_type)} is not supported; supported: {_supported_types()}")
    if model_type not in FAMILIES:  # counted, where transformers is installed, by building its model
        raise NoAdapter(
            f"{where}: model_type {shown(model_type)} is not supported; supported: {_supported_types()}",
            raw,
            name or where,
            where,
        )
    return FAMILIES[model_type], None


def _canonical(family: Family, raw: dict[str, Any]) -> dict[str, Any]:
    """The file's keys under their canonical names, over transformers' defaults. An alias gives way to its
    canonical key when the file has both."""
    cfg = dict(family.defaults)
    for key, value in raw.items():
        target = family.aliases.get(key, key)
        if target != key and target in raw:
            continue
        cfg[target] = value
    return cfg


def _head(family: Family, raw: dict[str, Any], cfg: Config, data: dict[str, Any], where: str) -> tuple[str, str | None]:
    """The class archspec counts and the head it gives the spec; with a note when the file names the class
    as the checkpoint's own code spells it (Phi-3.5-MoE's PhiMoEForCausalLM, with its auto_map), which
    transformers builds as its own class of the model_type (PhimoeForCausalLM)."""
    named = _architecture(raw, where)
    arch = named or family.class_names[0]
    note = None
    if not named:  # DeBERTa-v3's hand-written files name no class
        others = ", ".join(family.class_names[1:])
        note = (f"the file names no architectures: archspec counts {arch}, the first class of model_type "
                f"{family.model_type!r}" + (f" (also supported: {others})" if others else ""))  # fmt: skip
    if not arch.startswith(family.prefix) and arch.lower().startswith(family.prefix.lower()):
        native = family.prefix + arch[len(family.prefix) :]
        if native in family.class_names:
            note = (f"architectures names {arch}, the checkpoint's own code; transformers builds its {native} "
                    f"for model_type {family.model_type!r}, which archspec counts")  # fmt: skip
            arch = native
    kind = None
    if arch.startswith(family.prefix):
        suffix = arch[len(family.prefix) :]
        if suffix in family.classes:
            kind = HEAD_SUFFIXES[suffix]
    if kind is None:
        raise SpecError(
            f"{where}: architecture {shown(arch)} is not supported for model_type {family.model_type!r}; "
            f"supported: {', '.join(family.class_names)}"
        )
    if kind == "lm":
        data.setdefault("head", "lm")
        if family.tie_lm:
            data["tie_embeddings"] = bool(cfg["tie_word_embeddings"])
    elif kind == "pretraining" and family.pretraining:  # ELECTRA's discriminator: nothing to tie
        data["head"] = family.pretraining
        data["tie_embeddings"] = False
    elif kind == "mlm":  # the family's options of the masked-LM head (ModernBERT's biases), or BERT's
        head = data.get("head")
        data["head"] = head if isinstance(head, dict) and head.get("kind") == "mlm" else "mlm"
    else:
        data["head"] = "none"
        data.pop("tie_embeddings", None)
        if kind == "encoder":  # T5EncoderModel: the shared table and the encoder
            data["decoder_layers"] = 0
            for key in ("share_embeddings", "embedding_scale"):
                data.pop(key, None)
        elif family.pooler:
            data["pooler"] = True
    return arch, note


def _value(cfg: Config, key: str) -> Any:
    """A key's value; a dotted key names one inside a nested table (MPT's attn_config.qk_ln)."""
    if key in cfg or "." not in key:
        return cfg.get(key)
    table, _, sub = key.partition(".")
    nested = cfg.get(table)
    return nested.get(sub) if isinstance(nested, dict) else None


def _text_of(wrapper: Wrapper, raw: dict[str, Any], where: str) -> tuple[dict[str, Any], str, str | None]:
    """The text model's config of a multimodal wrapper, the class archspec counts, the head's tying (the
    checkpoint's, see _wrapper_tie) and a note where transformers 5 ties it otherwise."""
    text = raw.get("text_config")
    if text is None:
        text = {}  # transformers builds the text config class's defaults
    if not isinstance(text, dict):
        raise SpecError(f"{where}: text_config must be a JSON object, got {shown(text)}")
    text_type = text.get("model_type", wrapper.text_type)
    if not isinstance(text_type, str) or text_type not in FAMILIES:
        raise SpecError(f"{where}: the text model of {wrapper.model_type} (text_config model_type "
                        f"{shown(text_type)}) is not supported; supported: {_supported_types()}")  # fmt: skip
    family = FAMILIES[text_type]
    arch = _architecture(raw, where) or wrapper.prefix + "ForConditionalGeneration"
    if arch != wrapper.prefix + "ForConditionalGeneration":
        raise SpecError(f"{where}: architecture {shown(arch)} is not supported for model_type "
                        f"{wrapper.model_type!r}; supported: {wrapper.prefix}ForConditionalGeneration")  # fmt: skip
    if "ForCausalLM" not in family.classes:  # pragma: no cover - every wrapped family has one
        raise SpecError(f"{where}: {text_type} has no causal-LM class")
    out = {**text, "model_type": text_type, "architectures": [family.prefix + "ForCausalLM"]}
    note = None
    _flag(raw, "tie_word_embeddings", where, wrapper.model_type)
    _flag(text, "tie_word_embeddings", where, f"{wrapper.model_type} text_config")
    if wrapper.head == "wrapper":
        out["tie_word_embeddings"], note = _wrapper_tie(wrapper, family, raw, text, arch)
    return out, arch, note


def _flag(cfg: dict[str, Any], key: str, where: str, what: str) -> None:
    """Refuse a flag that is neither true, false nor null: transformers' configs take only a bool, and
    Python's truth of the string "false" is true."""
    value = cfg.get(key)
    if value is not None and not isinstance(value, bool):
        raise SpecError(f"{where}: {what} key {key}={shown(value)} is not true or false")


def _writer(raw: dict[str, Any]) -> int | None:
    """The major version of the transformers that wrote the file (its `transformers_version`), or None."""
    version = raw.get("transformers_version")
    found = re.match(r"\s*(\d+)\.", version) if isinstance(version, str) else None
    return int(found.group(1)) if found else None


def _wrapper_tie(
    wrapper: Wrapper, family: Family, raw: dict[str, Any], text: dict[str, Any], arch: str
) -> tuple[bool, str | None]:
    """Whether the head on a wrapper is tied, as the checkpoint the file came with stores it, and a note where
    transformers 5 builds the file otherwise. transformers 5 ties by the wrapper's own tie_word_embeddings
    (default: the wrapper class's); transformers 4 tied by the text config's (get_text_config(decoder=True);
    default: the text config class's) and saved the head beside the embedding where that said false. A
    file written by transformers 4 (Mistral Small 3.1's, 4.50) is read as 4 built and saved it."""
    top, own = raw.get("tie_word_embeddings"), text.get("tie_word_embeddings")
    as_5 = bool(top if top is not None else wrapper.tie)
    as_4 = bool(own if own is not None else family.defaults.get("tie_word_embeddings", True))
    default = f"{family.model_type}'s default {str(as_4).lower()}"
    said = f"tie_word_embeddings={own}" if own is not None else f"no tie_word_embeddings ({default})"
    why = f"={top}" if top is not None else f", default {str(wrapper.tie).lower()}"
    built = f"transformers 5 builds {arch} with its head {_tied(as_5)} (the wrapper's tie_word_embeddings{why})"
    major = _writer(raw)
    if major is not None and major < 5:
        if as_4 == as_5:
            return as_4, None
        saves = "saves no lm_head.weight" if as_4 else "saves lm_head.weight beside the token embedding"
        return as_4, (
            f"text_config says {said}: transformers {raw['transformers_version']}, which wrote the file, ties the "
            f"head as the text config says and {saves}; archspec counts the head {_tied(as_4)}, "
            f"as the checkpoint holds it (as vLLM and llama.cpp load it); {built}: --set "
            f"tie_embeddings={str(as_5).lower()} counts that model"
        )
    if own is not None and bool(own) != as_5:
        return as_5, f"text_config says {said}, but {built}, and so does archspec"
    return as_5, None


def _tied(tied: bool) -> str:
    return "tied" if tied else "untied"


def _non_finite(value: Any, at: str = "") -> str | None:
    """The path of the first non-finite number in spec data, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return at
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found = _non_finite(child, f"{at}.{key}" if at and isinstance(key, str) else f"{at}[{key}]" if at else key)
        if found is not None:
            return found
    return None


def from_mapping(raw: dict[str, Any], name: str, where: str = "") -> Imported:
    """Spec data (the given fields) of a config.json's object: a text model's, a multimodal wrapper's (its
    text model) or an alias's (read as the class its `architectures` names). Non-finite numbers are
    accepted in keys that do not reach the spec, and refused where they would."""
    where = where or name
    model_type = raw.get("model_type")
    if isinstance(model_type, str) and model_type in WRAPPERS and model_type not in FAMILIES:
        wrapper = WRAPPERS[model_type]
        text, arch, tie_note = _text_of(wrapper, raw, where)
        inner = from_mapping(text, name, where)
        present = [k.removesuffix("_config") for k in ("vision_config", "audio_config") if raw.get(k)]
        towers = (" and ".join(present) + (" towers" if len(present) > 1 else " tower")) if present else wrapper.towers
        notes = [f"{model_type} is a multimodal wrapper: archspec counts its text model ({inner.model_type}) with "
                 f"the output head of {arch}; the {towers} and projector are not counted"]  # fmt: skip
        if tie_note:
            notes.append(tie_note)
        return Imported(inner.data, inner.model_type, arch, (*notes, *inner.notes))
    family, alias = _family_of(raw, where, name)
    cfg = _canonical(family, raw)
    _flag(cfg, "tie_word_embeddings", where, family.model_type)
    data: dict[str, Any] = {"name": name}
    window = cfg.get("sliding_window")
    if (
        isinstance(window, int)
        and not isinstance(window, bool)
        and window < 1
        and cfg.get("use_sliding_window") is not False
    ):
        # transformers masks keys outside (i - window, i]: a window of 0 leaves a sliding layer no key at all
        raise SpecError(
            f"{where}: {family.model_type} key sliding_window={window} is no window: a sliding layer would "
            "attend to no token (transformers' mask); use null for full attention, or the window's length"
        )
    try:
        check_numbers(family, cfg)
        for refusal in family.refuse:
            if not refusal.ok(cfg):
                raise SpecError(
                    f"{where}: {family.model_type} key {refusal.key}={shown(_value(cfg, refusal.key))} is not "
                    f"supported ({refusal.why})"
                )
        data.update(family.fixed)
        for spec_field, key in family.fields.items():
            if cfg.get(key) is not None:
                data[spec_field] = cfg[key]
        if family.derive is not None:
            data.update(family.derive(cfg, where))
        arch, spelled = _head(family, raw, cfg, data, where)
        if data.get("head") == "lm":
            del data["head"]
        notes = ((spelled,) if spelled else ()) + (tuple(family.notes(cfg, data)) if family.notes else ())
    except SpecError:
        raise
    except NotANumber as exc:
        quoted = "; write it without quotes" if engine.quoted_number(exc.value) else ""
        raise SpecError(
            f"{where}: {family.model_type} key {exc.key}={shown(exc.value)} is not a number{quoted}"
        ) from None
    except KeyError as exc:  # a key without a default that the family needs
        raise SpecError(f"{where}: {family.model_type} config has no {shown(exc.args[0])}") from None
    except (TypeError, ValueError, ArithmeticError, AttributeError) as exc:  # a value of the wrong type, zero, huge
        raise SpecError(
            f"{where}: {family.model_type} config has a value of the wrong type or size ({clip(str(exc))})"
        ) from None
    bad = _non_finite(data)
    if bad is not None:
        raise SpecError(f"{where}: {family.model_type} config gives spec field {bad} a non-finite value; "
                        "Infinity and NaN are accepted only in keys that do not change the model")  # fmt: skip
    return Imported(data, family.model_type, arch, ((alias,) if alias else ()) + notes)
