"""Hugging Face config.json files as MODELs, checked against transformers' own models.

tests/data/hf/ holds real published config.json files (Hugging Face hub files, official or exact
copies; GPT-2 to DeepSeek-V3), one or more per supported model_type. For each one, transformers
builds the class named in `architectures` on the meta device from the same file (its config class
applying its own defaults), and archspec, which reads the file without torch or transformers, must
count the same parameters, component by component, and the same forward matmul FLOPs.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import archspec
from archspec import hf, loading, specfile
from archspec.flops import count_flops
from archspec.params import count_params

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

DATA = Path(__file__).parent / "data" / "hf"
CONFIGS = sorted(p.stem for p in DATA.glob("*.json"))


def raw_config_type(name: str):
    return json.loads((DATA / f"{name}.json").read_text()).get("model_type")


# real files whose shapes the spec cannot represent: refused by key, never counted wrong
REFUSED = {"opt-350m": "word_embed_proj_dim=512", "gemma-4-26b-a4b": "text_config model_type 'gemma4_text'"}
# model types with an adapter but no released config.json found verbatim (tested at toy size in VARIANTS)
NO_RELEASED_CONFIG = {"gemma3_text": "google/gemma-3-1b-it's file was not found reproduced verbatim"}
COUNTED = [c for c in CONFIGS if c not in REFUSED]


def _model_type(name: str) -> str:
    """The model_type archspec reads a file as: a wrapper's text model, an alias's class's type."""
    raw = json.loads((DATA / f"{name}.json").read_text())
    if raw.get("model_type") in hf.WRAPPERS:
        return (raw.get("text_config") or {}).get("model_type") or hf.WRAPPERS[raw["model_type"]].text_type
    if raw.get("model_type") in hf.FAMILIES:
        return raw["model_type"]
    return hf.CLASSES[raw["architectures"][0]]  # ALBERT's hub files name only the class; kimi_k2 names DeepSeek-V3's


MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text", "gemma4_text")
MOE = {c for c in COUNTED if _model_type(c) in MOE_TYPES}
WRAPPED = {c for c in COUNTED if raw_config_type(c) in hf.WRAPPERS}


# FLOPs: the smallest dense config of every model_type (a forward pass of a 126-layer model takes seconds
# even on the meta device), plus the configs whose layout differs within their family
FLOPS_EXTRA = {
    "falcon-40b": "two norms per parallel block, 8 key/value groups",
    "t5-v1_1-base": "gated GELU, unscaled head input",
    "llama-2-70b": "grouped-query attention",
    "gemma-2-27b": "attention scale from query_pre_attn_scalar",
}
DENSE = [c for c in COUNTED if c not in MOE]


def _smallest(model_type: str) -> str:
    return min((c for c in DENSE if _model_type(c) == model_type), key=lambda c: count_params(spec_of(c)).total)


def raw_config(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def build_transformers(raw: dict, device: str = "meta", experts: str | None = None):
    """transformers' model of a config.json: the config class of its model_type (or of the class in
    `architectures`) fills missing keys with its defaults; eager attention, whose matmuls FlopCounterMode sees;
    `experts` names the experts' implementation (batched_mm runs on the meta device)."""
    cls = getattr(transformers, raw["architectures"][0])
    known = raw.get("model_type") in transformers.CONFIG_MAPPING  # kimi_k2 is not: its class's config reads it
    config_cls = transformers.CONFIG_MAPPING[raw["model_type"]] if known else cls.config_class
    config = config_cls.from_dict(dict(raw))
    config._attn_implementation = "eager"
    if experts is not None:
        config._experts_implementation = experts
    with torch.device(device):
        return cls(config).eval()


# transformers' parameter names -> archspec's components, first match wins (names without .weight/.bias)
COMPONENT_PATTERNS = [
    (r"^(lm_head|cls\.predictions|predictions|vocab_transform|vocab_layer_norm|vocab_projector|embed_out)\b", "head"),
    (r"\bpooler\b", "pooler"),
    (r"(wpe|embed_positions|position_embeddings|relative_attention_bias)$", "position"),
    (r"token_type_embeddings$", "token_type"),
    (r"(wte|embed_tokens|word_embeddings|embed_in|shared|embedding_hidden_mapping_in)$", "embed"),
    (r"self_attn\.(q_a_layernorm|kv_a_layernorm|q_layernorm|k_layernorm|q_norm|k_norm)$", "attention"),  # in attention
    (r"(norm|Norm|ln_\w+|layernorm_embedding)$", "norm"),
    (r"(encoder_attn|EncDecAttention|crossattention)\.", "cross_attention"),
    (r"(mlp|feed_forward)\.(gate|router)$", "router"),
    (r"(mlp|feed_forward)\.experts\.", "experts"),
    (r"(mlp|feed_forward)\.shared_expert(s|_gate)?\b", "shared_experts"),
    (r"(attn|attention|self_attention|SelfAttention)\.", "attention"),
    (r"(mlp|feed_forward|ffn|ffn_output|intermediate|output\.dense|fc1|fc2|DenseReluDense)\b", "mlp"),
]
_PATTERNS = [(re.compile(p), c) for p, c in COMPONENT_PATTERNS]


def component_of(name: str) -> str:
    short = re.sub(r"\.(weight|bias)$", "", name)
    for pattern, component in _PATTERNS:
        if pattern.search(short):
            return component
    raise AssertionError(f"no component pattern matches transformers' parameter {name!r}")


SEQ = 16  # tokens per sequence (source and target) for the FLOP comparison


def forward_flops(model, kind: str) -> int:
    """FlopCounterMode over one forward pass of transformers' model on the meta device, 1 x SEQ tokens."""
    from torch.utils.flop_counter import FlopCounterMode

    tokens = torch.zeros(1, SEQ, dtype=torch.long, device="meta")
    inputs = {"input_ids": tokens}
    if kind == "encoder-decoder":
        inputs["decoder_input_ids"] = tokens
    if kind == "decoder-only":  # an explicit mask skips transformers' packed-sequence check, which reads data
        inputs["attention_mask"] = torch.ones(1, SEQ, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(**inputs)
    return counter.get_total_flops()


@cache
def measured(name: str) -> dict:
    """transformers' counts of one config, built once (the big ones take seconds on meta).
    Trainable parameters only: Marian's sinusoidal tables are nn.Parameters with requires_grad=False,
    constants that archspec, like the Transformer paper, does not count as parameters. FLOPs for the
    dense models only: routing tokens to experts is data-dependent and cannot run on the meta device."""
    model = build_transformers(raw_config(name))
    components: dict[str, int] = {}
    frozen = 0
    for pname, p in model.named_parameters():  # a tied tensor once
        if name in WRAPPED:  # the text model (language_model) and the head, not the towers
            if "language_model." not in pname and not pname.startswith("lm_head."):
                continue
            pname = pname.split("language_model.", 1)[-1]
        if not p.requires_grad:
            frozen += p.numel()
            continue
        key = component_of(pname)
        components[key] = components.get(key, 0) + p.numel()
    flops = forward_flops(model, spec_of(name).kind) if name in FLOPS_CHECKED else None
    return {"total": sum(components.values()), "components": components, "frozen": frozen, "flops": flops}


@cache
def spec_of(name: str):
    return archspec.load_spec(DATA / f"{name}.json")


FLOPS_CHECKED = sorted({_smallest(t) for t in {_model_type(c) for c in DENSE}} | set(FLOPS_EXTRA))


# ---------------------------------------------------------------- counts


@pytest.mark.parametrize("name", COUNTED)
def test_count_equals_transformers_model_of_the_same_config(name):
    assert count_params(spec_of(name)).total == measured(name)["total"]


@pytest.mark.parametrize("name", COUNTED)
def test_count_equals_transformers_component_by_component(name):
    ours = {k: v for k, v in count_params(spec_of(name)).components.items() if v}
    assert ours == measured(name)["components"]


def test_frozen_sinusoidal_tables_are_the_only_parameters_left_out():
    """transformers keeps Marian's sinusoidal positions as frozen nn.Parameters: 2 stacks x 512 x 512."""
    frozen = {name: measured(name)["frozen"] for name in COUNTED if measured(name)["frozen"]}
    assert frozen == {"opus-mt-de-zh": 2 * 512 * 512}
    assert spec_of("opus-mt-de-zh").position.kind == "sinusoidal"


@pytest.mark.parametrize("name", sorted(MOE))
def test_active_parameters_count_top_k_routed_experts(name):
    """active = total - routed experts a token does not use; transformers' routed experts are the
    parameters under mlp.experts, split evenly among the experts."""
    spec, m = spec_of(name), measured(name)
    routed = m["components"]["experts"]
    active = m["total"] - routed + routed * spec.mlp.top_k // spec.mlp.experts
    assert count_params(spec).active == active


# ---------------------------------------------------------------- FLOPs


@pytest.mark.parametrize("name", FLOPS_CHECKED)
def test_forward_flops_equal_flop_counter_on_transformers_model(name):
    """Forward matmul FLOPs at 1 x 16 tokens (source and target for an encoder-decoder), eager attention.
    MoE configs are left out: their routing is data-dependent and cannot run on the meta device."""
    assert count_flops(spec_of(name), batch=1, seq_len=SEQ).forward == measured(name)["flops"]


# MoE configs cut to 2 layers: transformers' "batched_mm" experts gather each token's top-k experts, so the
# meta device runs them; FlopCounterMode then sees the routed experts' matmuls
MOE_FLOPS = ["gpt-oss-20b", "qwen3-30b-a3b", "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct"]


def two_layers(raw: dict, layers: int = 2) -> dict:
    """A released config cut to its first layers (a wrapper's text model cut), layer_types left to the config
    class to derive."""
    if "text_config" in raw:
        return {**raw, "text_config": two_layers(raw["text_config"], layers)}
    out = {**raw, "num_hidden_layers": layers}
    out.pop("layer_types", None)
    return out


@pytest.mark.parametrize("name", MOE_FLOPS)
def test_moe_forward_flops_of_two_layers_equal_flop_counter_with_batched_experts(name):
    raw = two_layers(raw_config(name), 4)  # Llama 4's NoPE layer is the fourth
    # a wrapper: its text model (Llama4ForConditionalGeneration's own forward fails without images in 5.24)
    model = (
        build_text_model(raw, "batched_mm") if "text_config" in raw else build_transformers(raw, experts="batched_mm")
    )
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, name).data)
    dense_experts = 0
    if _model_type(name) == "llama4_text":
        # Llama4TextExperts runs every expert on every token (one bmm over all experts, the inputs of those not
        # chosen weighted by zero): transformers' count exceeds the top-k routed matmuls by exactly the others
        moe_layers = sum(layer.is_moe_layer for layer in model.model.layers)
        per_expert = 2 * 3 * spec.d_model * spec.mlp.d_expert  # gate, up and down, per token
        dense_experts = moe_layers * SEQ * (spec.mlp.experts - spec.mlp.top_k) * per_expert
    assert count_flops(spec, batch=1, seq_len=SEQ).forward + dense_experts == forward_flops(model, "decoder-only")


@pytest.mark.parametrize(
    "name", ["qwen1.5-moe-a2.7b", "deepseek-coder-v2-lite-base", "albert-base-v2", "t5-v1_1-base", "opus-mt-de-zh"]
)
def test_verify_builds_the_reference_model_of_an_imported_config(name):
    """archspec's own reference model of an imported spec (experts, latent attention, shared layers,
    encoder-decoders) has every tensor the description has, as many parameters as transformers' model of
    the same file, and the FLOPs the description counts (64 tokens)."""
    from archspec.reference import verify

    report = verify(spec_of(name), seq_len=64)
    assert report.ok and not report.tensor_mismatches
    assert report.params.measured == measured(name)["total"]


# ---------------------------------------------------------------- transformers' defaults


def _family_default_class(family: hf.Family) -> str:
    return family.class_names[0]


@pytest.mark.parametrize("model_type", sorted(hf.FAMILIES))
def test_adapter_defaults_are_transformers_config_class_defaults(model_type):
    """Every default an adapter applies to a missing key is the default of transformers' config class."""
    family = hf.FAMILIES[model_type]
    fields = {f.name: f for f in dataclasses.fields(transformers.CONFIG_MAPPING[model_type])}
    # keys the adapter reads that are not fields of the config class (legacy or Megatron keys): their
    # defaults come from the modelling code or the family's files, named in archspec/hf/
    not_fields = {"gpt_neox": {"rotary_pct", "rotary_emb_base"}, "bloom": {"seq_length"},
                  "t5": {"n_positions"}, "roberta": set(), "deepseek_v2": {"rope_interleave"}}  # fmt: skip
    for key, value in family.defaults.items():
        if key in not_fields.get(model_type, set()):
            continue
        assert key in fields, f"{model_type}: {key} is not a field of transformers' config class"
        f = fields[key]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert default == value, f"{model_type}: {key} defaults to {default!r} in transformers, {value!r} here"


@pytest.mark.parametrize("model_type", sorted(hf.FAMILIES))
def test_a_config_of_defaults_counts_what_transformers_builds_from_it(model_type):
    """A config.json with nothing but model_type and architectures: every shape comes from defaults."""
    family = hf.FAMILIES[model_type]
    raw = {"model_type": model_type, "architectures": [_family_default_class(family)]}
    if model_type == "deepseek_v2":
        raw["num_experts_per_tok"] = 6  # no default (None); the spec needs top-k
    model = build_transformers(raw)
    expected = sum(p.numel() for p in model.parameters() if p.requires_grad)
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, "defaults").data)
    assert count_params(spec).total == expected


# Keys whose non-default values no real file of the test set has, at toy sizes: every branch of an adapter
SMALL_DECODER = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "max_position_embeddings": 32}  # fmt: skip
VARIANTS = {
    "llama-biases-tied-head-dim": {"model_type": "llama", "architectures": ["LlamaForCausalLM"], **SMALL_DECODER,
                                   "num_key_value_heads": 2, "attention_bias": True, "mlp_bias": True,
                                   "tie_word_embeddings": True, "head_dim": 32},
    "gemma-attention-bias": {"model_type": "gemma", "architectures": ["GemmaForCausalLM"], **SMALL_DECODER,
                             "num_key_value_heads": 1, "head_dim": 16, "attention_bias": True},
    "gpt2-unscaled": {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 100, "n_embd": 64,
                      "n_layer": 2, "n_head": 4, "n_positions": 32, "n_inner": 96, "scale_attn_weights": False},
    "gpt-neo-all-global": {"model_type": "gpt_neo", "architectures": ["GPTNeoForCausalLM"], **SMALL_DECODER,
                           "num_layers": 2, "num_heads": 4, "attention_types": [[["global"], 2]]},
    "gpt-neo-local-first": {"model_type": "gpt_neo", "architectures": ["GPTNeoForCausalLM"], **SMALL_DECODER,
                            "num_layers": 2, "num_heads": 4, "attention_types": [[["local", "global"], 1]]},
    "gpt-neox-sequential": {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], **SMALL_DECODER,
                            "use_parallel_residual": False, "attention_bias": False, "tie_word_embeddings": True},
    "opt-post-norm": {"model_type": "opt", "architectures": ["OPTForCausalLM"], **SMALL_DECODER, "ffn_dim": 96,
                      "do_layer_norm_before": False, "word_embed_proj_dim": 64, "enable_bias": False},
    "falcon-alibi-sequential": {"model_type": "falcon", "architectures": ["FalconForCausalLM"], **SMALL_DECODER,
                                "alibi": True, "parallel_attn": False, "multi_query": False, "bias": True},
    "falcon-new-one-norm": {"model_type": "falcon", "architectures": ["FalconForCausalLM"], **SMALL_DECODER,
                            "new_decoder_architecture": True, "num_kv_heads": 2, "num_ln_in_parallel_attn": 1,
                            "ffn_hidden_size": 96},
    "phi-qk-layernorm": {"model_type": "phi", "architectures": ["PhiForCausalLM"], **SMALL_DECODER,
                         "num_key_value_heads": 2, "qk_layernorm": True, "partial_rotary_factor": 0.5},
    "starcoder2-no-bias": {"model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"], **SMALL_DECODER,
                           "num_key_value_heads": 2, "use_bias": False},
    "qwen2-moe-dense-first": {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], **SMALL_DECODER,
                              "num_key_value_heads": 4, "num_experts": 4, "num_experts_per_tok": 2,
                              "moe_intermediate_size": 32,
                              "shared_expert_intermediate_size": 48, "mlp_only_layers": [0], "norm_topk_prob": True},
    "qwen3-windows-after-max-window-layers": {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
                                              **SMALL_DECODER, "num_hidden_layers": 3, "num_key_value_heads": 2,
                                              "head_dim": 32, "use_sliding_window": True, "sliding_window": 8,
                                              "max_window_layers": 1, "attention_bias": True,
                                              "tie_word_embeddings": True},
    "qwen3-moe-dense-layers-and-step": {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
                                        **SMALL_DECODER, "num_hidden_layers": 5, "num_key_value_heads": 2,
                                        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                        "mlp_only_layers": [0], "decoder_sparse_step": 2, "head_dim": 8,
                                        "use_sliding_window": True, "sliding_window": 8},
    "gpt-oss-all-full-no-bias-tied": {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"],
                                      **SMALL_DECODER, "num_key_value_heads": 2, "head_dim": 8,
                                      "num_local_experts": 4, "num_experts_per_tok": 2, "attention_bias": False,
                                      "layer_types": ["full_attention", "full_attention"],
                                      "tie_word_embeddings": True},
    "gemma3-defaults-7-layers-softcaps-bias-untied": {
        "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"], **SMALL_DECODER, "num_hidden_layers": 7,
        "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8, "rope_local_base_freq": 5000.0,
        "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "tie_word_embeddings": False,
        "attention_bias": True},
    "deepseek-v2-biases-full-q": {"model_type": "deepseek_v2", "architectures": ["DeepseekV2ForCausalLM"],
                                  **SMALL_DECODER, "attention_bias": True, "q_lora_rank": None, "kv_lora_rank": 16,
                                  "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
                                  "n_routed_experts": 4, "n_shared_experts": 1, "moe_intermediate_size": 32,
                                  "first_k_dense_replace": 1, "num_experts_per_tok": 2},
    "deepseek-v3-biases": {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], **SMALL_DECODER,
                           "attention_bias": True, "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 16,
                           "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 4, "n_shared_experts": 2,
                           "moe_intermediate_size": 32, "first_k_dense_replace": 0, "num_experts_per_tok": 2,
                           "n_group": 1, "topk_group": 1},
    "t5-gated-silu-uneven": {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "vocab_size": 100,
                             "d_model": 64, "d_kv": 16, "d_ff": 96, "num_layers": 2, "num_decoder_layers": 1,
                             "num_heads": 4, "feed_forward_proj": "gated-silu"},
    "marian-separate-tables": {"model_type": "marian", "architectures": ["MarianMTModel"], "vocab_size": 100,
                               "d_model": 64, "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 4,
                               "decoder_attention_heads": 4, "encoder_ffn_dim": 96, "decoder_ffn_dim": 96,
                               "max_position_embeddings": 32, "share_encoder_decoder_embeddings": False,
                               "pad_token_id": 0},
    "bart-scaled": {"model_type": "bart", "architectures": ["BartForConditionalGeneration"], "vocab_size": 100,
                           "d_model": 64, "encoder_layers": 2, "decoder_layers": 1, "encoder_attention_heads": 4,
                           "decoder_attention_heads": 4, "encoder_ffn_dim": 96, "decoder_ffn_dim": 96,
                           "max_position_embeddings": 32, "scale_embedding": True},
    "distilbert-sinusoidal": {"model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"],
                              "vocab_size": 100, "dim": 64, "hidden_dim": 96, "n_layers": 2, "n_heads": 4,
                              "max_position_embeddings": 32, "sinusoidal_pos_embds": True},
}  # fmt: skip


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_adapter_variants_count_what_transformers_builds(variant):
    """Each non-default branch of an adapter, at toy size: archspec's components equal those of transformers'
    model of the same config (DistilBERT's sinusoidal table is a trainable parameter in transformers 5)."""
    raw = VARIANTS[variant]
    model = build_transformers(raw)
    expected: dict[str, int] = {}
    for pname, p in model.named_parameters():
        if p.requires_grad:
            expected[component_of(pname)] = expected.get(component_of(pname), 0) + p.numel()
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, variant).data)
    assert {k: v for k, v in count_params(spec).components.items() if v} == expected


# ---------------------------------------------------------------- heads by class


@pytest.mark.parametrize(
    "name, cls",
    [
        ("bert-base-uncased", "BertModel"),
        ("roberta-base", "RobertaModel"),
        ("albert-base-v2", "AlbertModel"),
        ("distilbert-base-uncased", "DistilBertModel"),
        ("gpt2", "GPT2Model"),
        ("llama-2-7b", "LlamaModel"),
        ("gpt-j-6b", "GPTJModel"),
        ("t5-base", "T5Model"),
        ("t5-base", "T5EncoderModel"),
        ("bart-base", "BartModel"),
        ("opus-mt-de-zh", "MarianModel"),
    ],
)
def test_the_class_in_architectures_decides_the_head(name, cls):
    """BertModel (pooler, no head) and BertForMaskedLM (masked-LM head, no pooler) differ; so do
    T5Model and T5EncoderModel."""
    raw = {**raw_config(name), "architectures": [cls]}
    model = build_transformers(raw)
    expected = sum(p.numel() for p in model.parameters() if p.requires_grad)
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, name).data)
    assert count_params(spec).total == expected
    assert spec.replace(name=name) != spec_of(name)  # GPT2Model counts as GPT2LMHeadModel (a tied head) but differs


def test_t5_with_an_untied_head_in_the_file_counts_what_transformers_builds_and_says_so():
    imported = loading.import_config(DATA / "flan-t5-xxl.json")
    assert imported.data["tie_embeddings"] is True and "head" not in imported.data  # no d_model**-0.5 rescale
    assert len(imported.notes) == 1 and "tie_embeddings = false" in imported.notes[0]
    untied = spec_of("flan-t5-xxl").replace(tie_embeddings=False)
    assert count_params(untied).total - count_params(spec_of("flan-t5-xxl")).total == 32128 * 4096
    assert count_params(spec_of("t5-base")).total == measured("t5-base")["total"] == 222_903_552


def test_falcon_legacy_keys_read_as_the_new_ones():
    assert spec_of("falcon-7b-legacy-keys").replace(name="falcon-7b-instruct") == spec_of("falcon-7b-instruct")


def test_bloom_legacy_n_embed_reads_as_hidden_size():
    assert spec_of("bloom-176b-bloomz").replace(name="bloomchat-176b") == spec_of("bloomchat-176b")


# ---------------------------------------------------------------- import writes a spec that counts the same


@pytest.mark.parametrize("name", COUNTED)
def test_imported_spec_file_loads_to_the_same_spec(name, run_cli, tmp_path):
    code, out, err = run_cli("import", str(DATA / f"{name}.json"))
    assert code == 0, err
    path = tmp_path / f"{name}.toml"
    path.write_text(out)
    loaded = archspec.load_spec(path)
    assert loaded == spec_of(name)
    assert count_params(loaded).total == measured(name)["total"]


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
def test_import_writes_the_format_of_the_output_suffix(suffix, run_cli, tmp_path):
    out = tmp_path / f"model{suffix}"
    code, _, err = run_cli("import", str(DATA / "deepseek-v3.json"), "-o", str(out))
    assert code == 0, err
    assert archspec.load_spec(out) == spec_of("deepseek-v3").replace(name="deepseek-v3")


def test_import_writes_only_fields_that_change_the_spec():
    """GPT-2's file sets nothing the spec does not default to, except its sizes."""
    data = specfile.essential(spec_of("gpt2"))
    assert data == {"name": "gpt2", "vocab_size": 50257, "d_model": 768, "decoder_layers": 12, "n_heads": 12,
                    "max_positions": 1024}  # fmt: skip


def test_import_applies_set_overrides(run_cli, tmp_path):
    code, out, err = run_cli("import", str(DATA / "flan-t5-xxl.json"), "--set", "tie_embeddings=false")
    assert code == 0 and "tie_embeddings = false" in out
    assert "note:" in err  # the tying note goes to stderr as well as into the file
    path = tmp_path / "flan.toml"
    path.write_text(out)
    assert count_params(archspec.load_spec(path)).total == 11_135_332_352  # the released checkpoint


# ---------------------------------------------------------------- MODEL resolution


def test_a_folder_holding_config_json_is_a_model_named_after_the_folder(tmp_path, run_json):
    folder = tmp_path / "Llama-2-7B_hf"
    folder.mkdir()
    (folder / "config.json").write_text((DATA / "llama-2-7b.json").read_text())
    spec = archspec.resolve_model(str(folder))
    assert spec.name == "llama-2-7b_hf"
    assert spec.replace(name="llama-2-7b") == spec_of("llama-2-7b")
    [obj] = run_json("params", str(folder / "config.json"))
    assert obj["name"] == "llama-2-7b_hf" and obj["total"] == 6_738_415_616


def test_one_params_call_counts_every_config(run_json):
    objects = run_json("params", *(str(DATA / f"{c}.json") for c in COUNTED))
    assert [o["name"] for o in objects] == COUNTED
    assert [o["total"] for o in objects] == [measured(c)["total"] for c in COUNTED]


def test_albert_files_without_model_type_are_read_by_their_class():
    assert "model_type" not in raw_config("albert-base-v2")
    assert spec_of("albert-base-v2").share_layers is True


def test_reading_a_config_imports_neither_torch_nor_transformers():
    code = (
        "import sys, archspec; assert 'archspec.hf' not in sys.modules; "
        f"archspec.load_spec({str(DATA / 'deepseek-v3.json')!r}); "
        "assert 'archspec.hf' in sys.modules; "
        "assert not {'torch', 'transformers'} & set(sys.modules), 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- refusals: exit 2, one line


def _write(tmp_path, obj, name="config.json") -> str:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


@pytest.mark.parametrize(
    "content, message",
    [
        ({"model_type": "mamba", "architectures": ["MambaForCausalLM"]}, "model_type 'mamba' is not supported"),
        (
            {"model_type": "llama", "architectures": ["LlamaForSequenceClassification"]},
            "architecture 'LlamaForSequenceClassification' is not supported for model_type 'llama'",
        ),
        ({"architectures": ["MysteryModel"], "vocab_size": 10}, "no model_type"),
        ({"model_type": "albert", "num_hidden_groups": 2}, "albert key num_hidden_groups=2 is not supported"),
        ({"model_type": "gpt2", "activation_function": "relu2"}, "activation_function='relu2' is not supported"),
        ({"model_type": "t5", "feed_forward_proj": "gated-tanh"}, "feed_forward_proj='gated-tanh' is not supported"),
        ({"model_type": "bart", "decoder_ffn_dim": 1}, "bart key decoder_ffn_dim=1 is not supported"),
        ({"model_type": "bart", "tie_word_embeddings": False}, "bart key tie_word_embeddings=False is not supported"),
        ({"model_type": "qwen2_moe", "mlp_only_layers": [3]}, "qwen2_moe key mlp_only_layers=[3] is not supported"),
        ({"model_type": ["llama"]}, "model_type ['llama'] is not supported"),
        (
            {"model_type": "qwen3", "num_hidden_layers": 2, "layer_types": ["chunked_attention", "full_attention"]},
            "layer_types entry 'chunked_attention' is not supported",
        ),
        ({"model_type": "qwen3_moe", "decoder_sparse_step": 0}, "qwen3_moe key decoder_sparse_step=0 is not supported"),
        ({"model_type": "gpt_oss", "swiglu_alpha": 1.0}, "gpt_oss key swiglu_alpha=1.0 is not supported"),
        (
            {"model_type": "llama4_text", "interleave_moe_layer_step": 0},
            "llama4_text key interleave_moe_layer_step=0 is not supported",
        ),
        (
            {"model_type": "llama4", "text_config": {"model_type": "mamba"}},
            "the text model of llama4 (text_config model_type 'mamba') is not supported",
        ),
        ({"model_type": "llama4", "text_config": [1]}, "text_config must be a JSON object"),
        (
            {"model_type": "llama4", "architectures": ["Llama4ForCausalLM"], "text_config": {}},
            "architecture 'Llama4ForCausalLM' is not supported for model_type 'llama4'",
        ),
        ({"model_type": "siglip", "vision_config": {"hidden_size": 8}}, "'siglip' has no text model"),
        (
            {"model_type": "gemma3", "text_config": {"use_bidirectional_attention": True}},
            "gemma3_text key use_bidirectional_attention=True is not supported",
        ),
        ({"model_type": "kimi_k3", "architectures": ["KimiK3ForCausalLM"]}, "model_type 'kimi_k3' is not supported"),
        ('{"model_type": "qwen3", "rope_theta": Infinity}', "spec field position.base a non-finite value"),
        (
            {"model_type": "gpt_oss", "num_hidden_layers": 1, "layer_types": ["chunked_attention"]},
            "layer_types entry 'chunked_attention' is not supported",
        ),
        ({"model_type": "llama", "architectures": "LlamaForCausalLM"}, "architectures must be a list of class names"),
        ({"model_type": "gptj", "n_head": "sixteen"}, "gptj config has a value of the wrong type"),
        ({"model_type": "llama", "hidden_size": "4096"}, "d_model"),
        ('{"model_type": "llama",', "malformed JSON"),
        ("[1, 2]", "not list"),
    ],
    ids=str.split(
        "unknown-type unknown-class no-type albert-groups activation t5-activation bart-ffn bart-untied "
        "qwen-moe-layers type-not-a-string qwen3-layer-types qwen3-moe-step gpt-oss-alpha llama4-step "
        "wrapper-text-type wrapper-text-not-object wrapper-class no-text-model gemma3-bidirectional alias-no-class "
        "non-finite-shape "
        "gpt-oss-layer-types classes-not-a-list wrong-type-in-arithmetic wrong-type-of-field "
        "malformed not-an-object"
    ),
)
def test_bad_configs_are_refused_with_one_line_and_exit_2(content, message, run_cli, tmp_path):
    path = _write(tmp_path, content)
    for command in (("params", path), ("import", path)):
        code, out, err = run_cli(*command)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("name, key", sorted(REFUSED.items()))
def test_real_configs_the_spec_cannot_represent_are_refused_by_key(name, key, run_cli):
    code, _, err = run_cli("params", str(DATA / f"{name}.json"))
    assert code == 2 and key in err and err.count("\n") == 1


def test_a_folder_without_config_json_is_refused(run_cli, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli("params", str(tmp_path / "empty"))
    assert code == 2 and "is a directory without a config.json" in err and err.count("\n") == 1


def test_unknown_model_type_lists_the_supported_ones(run_cli, tmp_path):
    _, _, err = run_cli("params", _write(tmp_path, {"model_type": "rwkv"}))
    assert all(t in err for t in hf.FAMILIES) and len(hf.FAMILIES) >= 26


def test_every_supported_model_type_has_a_real_config_in_the_test_set():
    types = {_model_type(c) for c in COUNTED}
    assert types == set(hf.FAMILIES) - set(NO_RELEASED_CONFIG)


# ---------------------------------------------------------------- released files as released


def test_gemma3_wrapper_defaults_count_the_text_model_gemma3_builds():
    """A gemma3 wrapper of defaults: Gemma3ForConditionalGeneration's language model and tied head."""
    raw = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"]}
    model = build_transformers(raw)
    expected = sum(p.numel() for n, p in model.named_parameters() if "language_model." in n or n.startswith("lm_head"))
    assert count_params(archspec.ModelSpec.model_validate(hf.from_mapping(raw, "g").data)).total == expected


@pytest.mark.parametrize(
    "variant",
    [
        "gemma3-defaults-7-layers-softcaps-bias-untied",
        "qwen3-windows-after-max-window-layers",
        "gpt-oss-all-full-no-bias-tied",
    ],
)
def test_layer_kinds_of_a_toy_config_give_the_forward_flops_transformers_runs(variant):
    raw = VARIANTS[variant]
    model = build_transformers(raw, experts="batched_mm")
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, variant).data)
    assert spec.layers is not None or variant.startswith("gpt-oss")
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == forward_flops(model, "decoder-only")


def build_text_model(raw: dict, experts: str | None = None):
    """The causal-LM class of a wrapper's text config, built from text_config alone, with the head tied as the
    wrapper builds it (Gemma's wrappers tie by their own tie_word_embeddings, Llama 4's text model by its own)."""
    wrapper = hf.WRAPPERS[raw["model_type"]]
    text = dict(raw["text_config"])
    if wrapper.head == "wrapper":
        text["tie_word_embeddings"] = raw.get("tie_word_embeddings", wrapper.tie)
    config = transformers.CONFIG_MAPPING[text["model_type"]].from_dict(text)
    config._attn_implementation = "eager"
    if experts is not None:
        config._experts_implementation = experts
    with torch.device("meta"):
        return transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(config)](config).eval()


@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_a_wrapper_counts_the_text_model_transformers_builds_from_its_text_config(name):
    """The causal-LM class of the text config's type, built from text_config alone (see build_text_model)."""
    model = build_text_model(raw_config(name))
    assert count_params(spec_of(name)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(WRAPPED))
def test_a_wrapper_says_its_towers_are_not_counted(name, run_cli, run_json):
    [obj] = run_json("params", str(DATA / f"{name}.json"))
    assert obj["total"] == measured(name)["total"] and any("not counted" in n for n in obj["notes"])
    code, out, err = run_cli("params", str(DATA / f"{name}.json"))
    assert code == 0 and "tower" in out and "not counted" in out
    code, out, err = run_cli("import", str(DATA / f"{name}.json"))
    assert code == 0 and "# note: " in out and "not counted" in err


def test_an_alias_is_read_as_the_class_its_architectures_names_and_says_so(run_json):
    """Kimi K2's file says model_type kimi_k2, which transformers does not know; its class is DeepSeek-V3's."""
    assert "kimi_k2" not in transformers.CONFIG_MAPPING and raw_config("kimi-k2-instruct")["model_type"] == "kimi_k2"
    [obj] = run_json("params", str(DATA / "kimi-k2-instruct.json"))
    assert obj["total"] == measured("kimi-k2-instruct")["total"] == 1_026_408_209_408
    assert any("kimi_k2" in n and "deepseek_v3" in n for n in obj["notes"])


def test_non_finite_numbers_in_keys_that_do_not_change_the_model_are_read_and_never_written(tmp_path, run_cli):
    raw = {**raw_config("qwen3-0.6b"), "router_aux_loss_coef": float("inf"), "initializer_range": float("nan")}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))  # writes Infinity and NaN, as released files do
    assert "Infinity" in path.read_text()
    for command in (("params", "--format", "json"), ("import",), ("import", "--format", "json"), ("show",)):
        code, out, err = run_cli(command[0], str(path), *command[1:])
        assert code == 0, err
        assert not re.search(r"Infinity|NaN|\binf\b|\bnan\b", out), out
    assert count_params(archspec.load_spec(path)).total == measured("qwen3-0.6b")["total"]
