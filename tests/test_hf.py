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

import pytest
from matrix import fast_corner, fast_only
from released import DATA, read_as_type

import archspec
from archspec import hf
from archspec.count.flops import count_flops
from archspec.count.params import count_params
from archspec.io import loading, specfile

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONFIGS = sorted(p.stem for p in DATA.glob("*.json"))


def raw_config_type(name: str):
    return json.loads((DATA / f"{name}.json").read_text()).get("model_type")


# real files whose shapes the spec cannot represent: refused by key, never counted wrong
REFUSED: dict[str, str] = {}  # none today (opt-350m, once refused for word_embed_proj_dim, is counted)
# model types with an adapter but no released config.json found verbatim (tested at toy size in VARIANTS)
COUNTED = [c for c in CONFIGS if c not in REFUSED]
# model types with a recurrent scan: exempt from the whole-model FLOP comparison (their attention- and
# MLP-only variants are compared in test_hybrid_variants_without_a_scan_...)
SCAN = {"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "nemotron_h", "jamba", "mamba2", "falcon_h1",
        "granitemoehybrid"}  # fmt: skip


def _model_type(name: str) -> str:
    """The model_type archspec reads a file as: a wrapper's text model, an alias's class's type."""
    return read_as_type(raw_config(name))


MOE_TYPES = ("mixtral", "phimoe", "dbrx", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss",
             "llama4_text", "gemma4_text", "glm4_moe", "olmoe", "minimax_m2", "deepseek_v32", "qwen3_next",
             "qwen3_5_moe_text", "granitemoe", "ernie4_5_moe", "jamba")  # fmt: skip


def _dense_gemma4(name: str) -> bool:
    """Gemma 4 has experts only with enable_moe_block (the 26B-A4B; the 31B is dense)."""
    text = raw_config(name).get("text_config") or {}
    return _model_type(name) == "gemma4_text" and not text.get("enable_moe_block")


def raw_config(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


MOE = {c for c in COUNTED if (_model_type(c) in MOE_TYPES and not _dense_gemma4(c))
       or "E" in raw_config(c).get("hybrid_override_pattern", "")}  # fmt: skip
WRAPPED = {c for c in COUNTED if raw_config_type(c) in hf.WRAPPERS}


# FLOPs: the smallest dense config of every model_type (a forward pass of a 126-layer model takes seconds
# even on the meta device), plus the configs whose layout differs within their family
FLOPS_EXTRA = {
    "falcon-40b": "two norms per parallel block, 8 key/value groups",
    "t5-v1_1-base": "gated GELU, unscaled head input",
    "llama-2-70b": "grouped-query attention",
    "gemma-2-27b": "attention scale from query_pre_attn_scalar",
}
DENSE = [c for c in COUNTED if c not in MOE and _model_type(c) not in SCAN]


def _smallest(model_type: str) -> str:
    return min((c for c in DENSE if _model_type(c) == model_type), key=lambda c: count_params(spec_of(c)).total)


def build_transformers(raw: dict, device: str = "meta", experts: str | None = None):
    """transformers' model of a config.json: the config class of its model_type (or of the class in
    `architectures`) fills missing keys with its defaults; eager attention, whose matmuls FlopCounterMode sees;
    `experts` names the experts' implementation (batched_mm runs on the meta device)."""
    # a file that names no class (DeBERTa-v3's): the class archspec says it counts, its family's first
    arch = (raw.get("architectures") or [hf.FAMILIES[raw["model_type"]].class_names[0]])[0]
    cls = getattr(transformers, arch, None)
    known = raw.get("model_type") in transformers.CONFIG_MAPPING  # kimi_k2 is not: its class's config reads it
    config_cls = transformers.CONFIG_MAPPING[raw["model_type"]] if known else cls.config_class
    if cls is None:  # the checkpoint's own code's class (Phi-3.5-MoE's PhiMoEForCausalLM): the auto class's
        cls = transformers.MODEL_FOR_CAUSAL_LM_MAPPING[config_cls]
    config = config_cls.from_dict(dict(raw))
    config._attn_implementation = "eager"
    if experts is not None:
        config._experts_implementation = experts
    with torch.device(device):
        return cls(config).eval()


def as_released(model, raw: dict):
    """transformers 5 ties the head of T5, mT5 and umT5 to the shared embedding whatever the file says
    (their config classes force tie_word_embeddings = True); a file with tie_word_embeddings: false
    comes with a checkpoint that holds a separate lm_head.weight (vocab_size x d_model). This gives
    transformers' model that head, untied, so that it counts the checkpoint's tensors (a file without
    model_type by the class of its architectures)."""
    model_type = raw.get("model_type") or hf.CLASSES.get((raw.get("architectures") or [""])[0])
    if model_type in ("t5", "mt5", "umt5") and raw.get("tie_word_embeddings") is False and hasattr(model, "lm_head"):
        head = model.lm_head
        model.lm_head = torch.nn.Linear(head.in_features, head.out_features, bias=False, device=head.weight.device)
    return model


# transformers' parameter names -> archspec's components, first match wins (names without .weight/.bias)
COMPONENT_PATTERNS = [
    # the tied token table, named after the head's decoder where the class registers its head first (XLM-RoBERTa)
    (r"^lm_head\.decoder$", "embed"),
    (
        r"^(lm_head|cls\.predictions|predictions|vocab_transform|vocab_layer_norm|vocab_projector|embed_out|generator_\w+|discriminator_predictions|lm_predictions)\b",
        "head",
    ),
    (r"^(head\.|decoder$)", "head"),  # ModernBERT's masked-LM head and its decoder's vocabulary bias
    (r"\bpooler\b", "pooler"),
    (r"(wpe|embed_positions|position_embeddings|relative_attention_bias|positions_embed|rel_embeddings)$", "position"),
    (r"token_type_embeddings$", "token_type"),
    (
        r"(wte|embed_tokens|word_embeddings|embed_in|shared|embedding_hidden_mapping_in|embeddings_project|tokens_embed|tok_embeddings|project_in|project_out)$",
        "embed",
    ),
    (
        r"self_attn\.(q_a_layernorm|kv_a_layernorm|q_layernorm|k_layernorm|query_layernorm|key_layernorm|q_norm|k_norm|indexer\.k_norm)$",
        "attention",
    ),  # norms inside attention
    # recurrent mixers (Qwen3-Next's linear_attn, Jamba's mamba); Nemotron-H and Mamba-2 name every sub-layer
    # `mixer`: attention, MLP and experts by their projections, the rest a Mamba-2 mixer
    (r"(linear_attn|mamba)\.", "mixer"),
    (r"mixer\.(q_proj|k_proj|v_proj|o_proj)$", "attention"),
    (r"mixer\.(up_proj|down_proj)$", "mlp"),
    (r"mixer\.gate$", "router"),
    (r"mixer\.experts\.", "experts"),
    (r"mixer\.shared_experts\.", "shared_experts"),
    (r"mixer\.", "mixer"),
    (r"\bembeddings$", "embed"),
    (r"(norm|Norm|ln_\w+|layernorm_embedding|norm_[12f])$", "norm"),  # MPT, DBRX: norm_1, norm_2, norm_f
    (r"layers\.\d+\.router\.", "router"),  # Gemma 4: router.proj, router.scale, router.per_expert_scale
    (r"layers\.\d+\.experts\.", "experts"),  # Gemma 4: the experts beside the layer's mlp
    (r"(encoder_attn|EncDecAttention|crossattention)\.", "cross_attention"),
    (r"mlp\.gate$|mlp\.gate\.moe_statics\.e_score_correction_bias$", "router"),  # ERNIE 4.5's correction
    (r"(mlp|block_sparse_moe)\.router$|mlp\.gate\.wg$|ffn\.router\.layer$", "router"),  # Phi-MoE, Granite, DBRX
    (r"(mlp|block_sparse_moe|ffn)\.experts\.", "experts"),
    (r"mlp\.shared_expert(s|_gate)?\b|\bshared_mlp\b", "shared_experts"),
    (r"feed_forward\.(gate|router)$", "router"),  # Jamba, Llama 4
    (r"feed_forward\.experts\.", "experts"),
    (r"feed_forward\.shared_expert(s|_gate)?\b", "shared_experts"),  # Llama 4
    (r"feed_forward\.", "mlp"),
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
READS_DATA = {"deberta-v2"}  # model types whose forward pass reads values, which the meta device has not


def forward_flops(model, kind: str) -> int:
    """FlopCounterMode over one forward pass of transformers' model (on the device it was built on, the meta
    device but for READS_DATA), 1 x SEQ tokens."""
    from torch.utils.flop_counter import FlopCounterMode

    device = next(model.parameters()).device
    tokens = torch.zeros(1, SEQ, dtype=torch.long, device=device)
    inputs = {"input_ids": tokens}
    if kind == "encoder-decoder":
        inputs["decoder_input_ids"] = tokens
    if kind == "decoder-only":  # an explicit mask skips transformers' packed-sequence check, which reads data
        inputs["attention_mask"] = torch.ones(1, SEQ, dtype=torch.long, device=device)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(**inputs)
    return counter.get_total_flops()


# frozen nn.Parameters that the checkpoint stores and archspec counts: ERNIE 4.5's score-correction bias
# (moe_statics.e_score_correction_bias, requires_grad=False in transformers, a tensor of the released weights)
STORED_FROZEN = re.compile(r"\.moe_statics\.e_score_correction_bias$")


def counted(pname: str, p) -> bool:
    """A parameter archspec counts: trainable, or frozen but stored in the checkpoint (STORED_FROZEN)."""
    return p.requires_grad or bool(STORED_FROZEN.search(pname))


@cache
def measured(name: str) -> dict:
    """transformers' counts of one config, built once (the big ones take seconds on meta).
    Trainable parameters only: Marian's sinusoidal tables are nn.Parameters with requires_grad=False,
    constants that archspec, like the Transformer paper, does not count as parameters. FLOPs for the
    dense models only: routing tokens to experts is data-dependent and cannot run on the meta device."""
    model = as_released(build_transformers(raw_config(name)), raw_config(name))
    components: dict[str, int] = {}
    frozen = 0
    for pname, p in model.named_parameters():  # a tied tensor once
        if name in WRAPPED:  # the text model (language_model) and the head, not the towers
            if "language_model." not in pname and not pname.startswith("lm_head."):
                continue
            pname = pname.split("language_model.", 1)[-1]
        if not counted(pname, p):
            frozen += p.numel()
            continue
        key = component_of(pname)
        components[key] = components.get(key, 0) + p.numel()
    if "shared_experts" in components and "experts" not in components:
        # a shared expert is one beside routed experts; without any it is the MLP (Granite 4.0's dense
        # models keep the name shared_mlp with num_local_experts 0)
        components["mlp"] = components.get("mlp", 0) + components.pop("shared_experts")
    flops = None
    if name in FLOPS_CHECKED:  # DeBERTa's relative positions read a tensor's value: a real model on the CPU
        runs = model
        if _model_type(name) in READS_DATA:  # weights left uninitialised: their values change no FLOP
            try:
                from transformers.initialization import no_init_weights
            except ImportError:  # transformers 4
                from transformers.modeling_utils import no_init_weights
            with no_init_weights():
                runs = build_transformers(raw_config(name), device="cpu")
        flops = forward_flops(runs, spec_of(name).kind)
    return {"total": sum(components.values()), "components": components, "frozen": frozen, "flops": flops}


@cache
def spec_of(name: str):
    return archspec.load_spec(DATA / f"{name}.json")


FLOPS_CHECKED = sorted({_smallest(t) for t in {_model_type(c) for c in DENSE}} | set(FLOPS_EXTRA))

# the fast set's representatives (`-m "not slow"`): small configs of the main lineages, dense and MoE,
# encoder, decoder and encoder-decoder; every config of tests/data/hf/ runs in CI
# the fast set's released files: a decoder, an encoder, an encoder-decoder, a mixture of experts, Qwen3
FAST = {"gpt2", "qwen3-0.6b", "bert-base-uncased", "t5-base", "qwen1.5-moe-a2.7b"}
FAST_TYPES = {"gpt2", "llama", "qwen3", "bert", "t5", "bart", "mixtral", "deepseek_v2", "nemotron_h"}


# ---------------------------------------------------------------- counts


@pytest.mark.parametrize("name", fast_only(COUNTED, FAST))
def test_count_equals_transformers_model_of_the_same_config(name):
    assert count_params(spec_of(name)).total == measured(name)["total"]


@pytest.mark.parametrize("name", fast_only(COUNTED, FAST))
def test_count_equals_transformers_component_by_component(name):
    ours = {k: v for k, v in count_params(spec_of(name)).components.items() if v}
    assert ours == measured(name)["components"]


@pytest.mark.slow  # every released config built by transformers (in a full run, once for the tests above too)
def test_frozen_sinusoidal_tables_are_the_only_parameters_left_out():
    """transformers keeps Marian's sinusoidal positions as frozen nn.Parameters: 2 stacks x 512 x 512."""
    frozen = {name: measured(name)["frozen"] for name in COUNTED if measured(name)["frozen"]}
    assert frozen == {"opus-mt-de-zh": 2 * 512 * 512}
    assert spec_of("opus-mt-de-zh").position.kind == "sinusoidal"


def test_marians_frozen_sinusoidal_tables_are_left_out_and_the_representatives_have_none():
    assert measured("opus-mt-de-zh")["frozen"] == 2 * 512 * 512
    assert spec_of("opus-mt-de-zh").position.kind == "sinusoidal"
    assert [measured(name)["frozen"] for name in sorted(FAST)] == [0] * len(FAST)


@pytest.mark.parametrize("name", fast_only(sorted(MOE), FAST & MOE))
def test_active_parameters_count_top_k_routed_experts(name):
    """active = total - routed experts a token does not use; transformers' routed experts are the
    parameters under mlp.experts, split evenly among the experts."""
    spec, m = spec_of(name), measured(name)
    routed = m["components"]["experts"]
    moe = spec.mlp if spec.mlp.kind == "moe" else next(k for k in spec.kinds.values() if k.mlp and "top_k" in k.mlp)
    top_k, experts = (moe.top_k, moe.experts) if spec.mlp.kind == "moe" else (moe.mlp["top_k"], moe.mlp["experts"])
    active = m["total"] - routed + routed * top_k // experts
    assert count_params(spec).active == active


# ---------------------------------------------------------------- FLOPs


@pytest.mark.parametrize("name", fast_only(FLOPS_CHECKED, FAST & set(FLOPS_CHECKED)))
def test_forward_flops_equal_flop_counter_on_transformers_model(name):
    """Forward matmul FLOPs at 1 x 16 tokens (source and target for an encoder-decoder), eager attention.
    MoE configs are left out: their routing is data-dependent and cannot run on the meta device."""
    assert count_flops(spec_of(name), batch=1, seq_len=SEQ).forward == measured(name)["flops"]


def test_deepseek_v32_indexer_flops_equal_flop_counter_on_transformers_model():
    """DeepSeek-V3.2's indexer at toy size, every layer dense (its routing cannot run on meta): wq_b, wk,
    weights_proj and the index scores over every key (q . k per head, then the weighted sum over heads), as
    transformers computes them beside the latent attention; and without the indexer the count is less."""
    raw = {**VARIANTS["deepseek-v32-dense-prefix-biases"], "mlp_layer_types": None, "first_k_dense_replace": 3}
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, "v32-dense").data)
    assert spec.mlp.dense_layers == 3 and spec.attention.indexer is not None
    measured_flops = forward_flops(build_transformers(raw), "decoder-only")
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == measured_flops
    plain = spec.replace(attention={**spec.attention.model_dump(), "indexer": None})
    ix = spec.attention.indexer
    q_rank, d = 24, 64  # wq_b reads the query latent; wk and weights_proj the layer's input
    per_layer = 2 * SEQ * (q_rank * ix.heads * ix.d_head + d * ix.d_head + d * ix.heads)
    per_layer += 2 * SEQ * SEQ * ix.heads * (ix.d_head + 1)  # every query against every key
    assert measured_flops - count_flops(plain, batch=1, seq_len=SEQ).forward == 3 * per_layer


# MoE configs cut to 2 layers: transformers' "batched_mm" experts gather each token's top-k experts, so the
# meta device runs them; FlopCounterMode then sees the routed experts' matmuls
MOE_FLOPS = [
    "gpt-oss-20b",
    "qwen3-30b-a3b",
    "llama-4-scout-17b-16e-instruct",
    "llama-4-maverick-17b-128e-instruct",
    "gemma-4-26b-a4b",
]


def two_layers(raw: dict, layers: int = 2) -> dict:
    """A released config cut to its first layers (a wrapper's text model cut), layer_types left to the config
    class to derive."""
    if "text_config" in raw:
        return {**raw, "text_config": two_layers(raw["text_config"], layers)}
    out = {**raw, "num_hidden_layers": layers}
    out.pop("layer_types", None)
    return out


@pytest.mark.parametrize("name", fast_only(MOE_FLOPS, {"qwen3-30b-a3b"}))
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
    "name",
    fast_only(["qwen1.5-moe-a2.7b", "deepseek-coder-v2-lite-base", "albert-base-v2", "t5-v1_1-base", "opus-mt-de-zh"],
              {"albert-base-v2"}),  # seconds each: the reference model built and measured at 64 tokens
)  # fmt: skip
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
                  "t5": {"n_positions"}, "mt5": {"n_positions"}, "umt5": {"n_positions"}, "roberta": set(),
                  "deepseek_v2": {"rope_interleave"},
                  # Gemma 4's __post_init__ pops these kwargs (512 and None), and the defaults test counts them
                  "gemma4_text": {"global_head_dim", "num_global_key_value_heads"}}  # fmt: skip
    # Qwen3-Next's and Qwen3.5's full_attention_interval is read by __post_init__ (default 4), not a field
    for key, value in family.defaults.items():
        if key in not_fields.get(model_type, set()):
            continue
        assert key in fields, f"{model_type}: {key} is not a field of transformers' config class"
        f = fields[key]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        assert default == value, f"{model_type}: {key} defaults to {default!r} in transformers, {value!r} here"


# transformers 5.24 cannot build these from its own defaults alone: the one key each needs
DEFAULTS_THAT_DO_NOT_BUILD = {
    "hunyuan_v1_dense": {"head_dim": 128},  # head_dim None: HunYuanDenseV1Attention computes None ** -0.5
    "hunyuan_v1_moe": {"head_dim": 128},
    "ministral": {"head_dim": 128},  # head_dim None: MinistralAttention computes None ** -0.5
    "nemotron": {"num_key_value_heads": 48},  # None: NemotronAttention divides by it
    "dbrx": {"attn_config": {"rope_theta": 500000.0}},  # DbrxAttention reads attn_config.rope_theta
}


# defaults that hold a feature the adapter refuses by name (tested in the refusals): the one key that turns it off
DEFAULTS_REFUSED = {
    "gemma4_text": {"hidden_size_per_layer_input": 0},  # 256: Gemma 3n-style per-layer embeddings (PLE)
}


@pytest.mark.parametrize("model_type", fast_only(sorted(hf.FAMILIES), FAST_TYPES))
def test_a_config_of_defaults_counts_what_transformers_builds_from_it(model_type):
    """A config.json with nothing but model_type and architectures: every shape comes from defaults."""
    family = hf.FAMILIES[model_type]
    raw = {"model_type": model_type, "architectures": [_family_default_class(family)]}
    if model_type == "deepseek_v2":
        raw["num_experts_per_tok"] = 6  # no default (None); the spec needs top-k
    raw.update(DEFAULTS_THAT_DO_NOT_BUILD.get(model_type, {}))
    raw.update(DEFAULTS_REFUSED.get(model_type, {}))
    if model_type == "glm4_moe":  # the defaults' head_dim 4096 // 96 = 42 has an odd rotary half (21)
        raw["head_dim"] = 128
    model = build_transformers(raw)
    expected = sum(p.numel() for n, p in model.named_parameters() if counted(n, p))
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
    "qwen2-windows-after-max-window-layers": {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
                                              **SMALL_DECODER, "num_hidden_layers": 3, "num_key_value_heads": 2,
                                              "use_sliding_window": True, "sliding_window": 8,
                                              "max_window_layers": 1},
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
    "glm4-moe-qk-norm-no-shared": {"model_type": "glm4_moe", "architectures": ["Glm4MoeForCausalLM"],
                                   **SMALL_DECODER, "num_key_value_heads": 2, "head_dim": 24, "use_qk_norm": True,
                                   "attention_bias": False, "n_routed_experts": 4, "n_shared_experts": 0,
                                   "moe_intermediate_size": 32, "num_experts_per_tok": 2, "first_k_dense_replace": 0,
                                   "routed_scaling_factor": 2.5, "tie_word_embeddings": True},
    "olmo-biases-gqa": {"model_type": "olmo", "architectures": ["OlmoForCausalLM"], **SMALL_DECODER,
                        "num_key_value_heads": 2, "attention_bias": True, "clip_qkv": 8.0},
    "olmo2-biases-head-dim": {"model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], **SMALL_DECODER,
                              "num_key_value_heads": 2, "attention_bias": True, "head_dim": 24,
                              "tie_word_embeddings": True},
    "olmo3-layer-types": {"model_type": "olmo3", "architectures": ["Olmo3ForCausalLM"], **SMALL_DECODER,
                          "num_hidden_layers": 5, "num_key_value_heads": 2, "sliding_window": 8,
                          "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                                          "full_attention", "sliding_attention"]},
    "olmoe-renormalised": {"model_type": "olmoe", "architectures": ["OlmoeForCausalLM"], **SMALL_DECODER,
                           "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
                           "norm_topk_prob": True, "attention_bias": True},
    "minimax-m2-rotary-dim": {"model_type": "minimax_m2", "architectures": ["MiniMaxM2ForCausalLM"], **SMALL_DECODER,
                              "num_key_value_heads": 2, "head_dim": 24, "rotary_dim": 8, "num_local_experts": 4,
                              "num_experts_per_tok": 2, "tie_word_embeddings": True, "use_mtp": True,
                              "num_mtp_modules": 2},
    "deepseek-v32-dense-prefix-biases": {
        "model_type": "deepseek_v32", "architectures": ["DeepseekV32ForCausalLM"], **SMALL_DECODER,
        "num_hidden_layers": 3, "num_key_value_heads": 4, "attention_bias": True, "q_lora_rank": 24,
        "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 4,
        "n_shared_experts": 2, "moe_intermediate_size": 32, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
        "index_n_heads": 3, "index_head_dim": 12, "index_topk": 5, "mlp_layer_types": ["dense", "sparse", "sparse"]},
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
    "qwen3-next-dense-layers-interval": {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"],
                                         **SMALL_DECODER, "num_hidden_layers": 4, "num_key_value_heads": 2,
                                         "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                         "linear_key_head_dim": 8, "linear_value_head_dim": 12, "num_experts": 4,
                                         "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                         "shared_expert_intermediate_size": 40, "mlp_only_layers": [0],
                                         "decoder_sparse_step": 1, "full_attention_interval": 2,
                                         "attention_bias": True, "tie_word_embeddings": True},
    "qwen3-next-no-experts": {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], **SMALL_DECODER,
                              "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2,
                              "linear_num_value_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
                              "num_experts": 0, "layer_types": ["linear_attention", "full_attention"]},
    "nemotron-h-layers-block-type": {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"],
                                     **SMALL_DECODER, "num_key_value_heads": 2, "head_dim": 16,
                                     "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
                                     "mamba_num_heads": 4, "mamba_head_dim": 8, "ssm_state_size": 8, "n_groups": 2,
                                     "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                     "moe_shared_expert_intermediate_size": 40,
                                     "use_conv_bias": False, "use_bias": True},
    "nemotron-h-mlp-bias": {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], **SMALL_DECODER,
                            "num_key_value_heads": 2, "head_dim": 16, "hybrid_override_pattern": "*-",
                            "mlp_bias": True, "mlp_hidden_act": "relu"},
    "nemotron-h-all-mamba": {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], **SMALL_DECODER,
                             "hybrid_override_pattern": "MMM", "num_key_value_heads": 2, "mamba_num_heads": 4,
                             "mamba_head_dim": 8, "ssm_state_size": 8, "n_groups": 1},
    # no released Jamba config.json was found byte for byte (only transcriptions); toys of its keys
    "jamba-periods-auto-rank": {"model_type": "jamba", "architectures": ["JambaForCausalLM"], **SMALL_DECODER,
                                "num_hidden_layers": 8, "num_key_value_heads": 2, "num_experts": 4,
                                "attn_layer_period": 4, "attn_layer_offset": 1, "expert_layer_period": 3,
                                "expert_layer_offset": 2, "mamba_d_state": 8, "mamba_proj_bias": True},
    "jamba-one-expert": {"model_type": "jamba", "architectures": ["JambaForCausalLM"], **SMALL_DECODER,
                         "num_hidden_layers": 3, "num_key_value_heads": 2, "num_experts": 1, "attn_layer_period": 3,
                         "attn_layer_offset": 0, "mamba_dt_rank": 5, "mamba_conv_bias": False},
    "mbart-scaled-relu": {"model_type": "mbart", "architectures": ["MBartForConditionalGeneration"],
                                  "vocab_size": 100, "d_model": 64, "encoder_layers": 2, "decoder_layers": 1,
                                  "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 96,
                                  "decoder_ffn_dim": 96, "max_position_embeddings": 32, "scale_embedding": True,
                                  "activation_function": "relu"},
    "mbart-model": {"model_type": "mbart", "architectures": ["MBartModel"], "vocab_size": 100, "d_model": 64,
                    "encoder_layers": 1, "decoder_layers": 2, "encoder_attention_heads": 4,
                    "decoder_attention_heads": 4, "encoder_ffn_dim": 96, "decoder_ffn_dim": 96,
                    "max_position_embeddings": 32},
    "umt5-tied-scaled-head": {"model_type": "umt5", "architectures": ["UMT5ForConditionalGeneration"],
                              "vocab_size": 100, "d_model": 64, "d_kv": 16, "d_ff": 96, "num_layers": 2,
                              "num_decoder_layers": 3, "num_heads": 4},
    "umt5-untied-gated-silu": {"model_type": "umt5", "architectures": ["UMT5ForConditionalGeneration"],
                               "vocab_size": 100, "d_model": 64, "d_kv": 8, "d_ff": 80, "num_layers": 3,
                               "num_decoder_layers": 2, "num_heads": 6, "feed_forward_proj": "gated-silu",
                               "tie_word_embeddings": False, "relative_attention_num_buckets": 16},
    # a file naming the class and no model_type (google/umt5-small's, a public porting note reports): read by the class
    "umt5-no-model-type-untied": {"architectures": ["UMT5ForConditionalGeneration"], "vocab_size": 100, "d_model": 64,
                                  "d_kv": 16, "d_ff": 96, "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4,
                                  "tie_word_embeddings": False},
    "umt5-encoder": {"model_type": "umt5", "architectures": ["UMT5EncoderModel"], "vocab_size": 100, "d_model": 64,
                     "d_kv": 16, "d_ff": 96, "num_layers": 2, "num_heads": 4, "feed_forward_proj": "relu"},
    "mamba2-groups-untied": {"model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "vocab_size": 100,
                             "hidden_size": 64, "num_heads": 8, "head_dim": 16, "state_size": 16, "n_groups": 2,
                             "num_hidden_layers": 2, "expand": 2},
    "mamba2-biases-tied-dt-limit": {"model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "vocab_size": 100,
                                    "hidden_size": 48, "num_heads": 6, "head_dim": 24, "state_size": 8, "n_groups": 3,
                                    "num_hidden_layers": 3, "expand": 3, "use_bias": True, "use_conv_bias": False,
                                    "conv_kernel": 3, "tie_word_embeddings": True, "time_step_limit": [0.001, 100.0]},
    "mamba2-model": {"model_type": "mamba2", "architectures": ["Mamba2Model"], "vocab_size": 100, "hidden_size": 64,
                     "num_heads": 4, "head_dim": 32, "state_size": 16, "n_groups": 1, "num_hidden_layers": 2},
    "distilbert-sinusoidal": {"model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"],
                              "vocab_size": 100, "dim": 64, "hidden_dim": 96, "n_layers": 2, "n_heads": 4,
                              "max_position_embeddings": 32, "sinusoidal_pos_embds": True},
}  # fmt: skip


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_adapter_variants_count_what_transformers_builds(variant):
    """Each non-default branch of an adapter, at toy size: archspec's components equal those of transformers'
    model of the same config (DistilBERT's sinusoidal table is a trainable parameter in transformers 5), with the
    released checkpoint's untied head where the file says so (as_released)."""
    raw = VARIANTS[variant]
    model = as_released(build_transformers(raw), raw)
    expected: dict[str, int] = {}
    for pname, p in model.named_parameters():
        if counted(pname, p) and p.numel():  # GLM-4.5 builds its shared expert 0 wide without shared experts
            expected[component_of(pname)] = expected.get(component_of(pname), 0) + p.numel()
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, variant).data)
    assert {k: v for k, v in count_params(spec).components.items() if v} == expected


# Decoders of 2024-2025 (archspec/hf/decoders.py, granite.py, cohere.py, gpt.py) at toy size, with the non-default
# branches of each adapter: components, and forward FLOPs (dense) or active parameters (MoE) against transformers
TOY = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "max_position_embeddings": 32}  # fmt: skip
ENCODER_TOY = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
               "num_attention_heads": 4, "max_position_embeddings": 32}  # fmt: skip
MODERNBERT_TOY = {"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"], **ENCODER_TOY,
                  "num_hidden_layers": 4, "local_attention": 8, "max_position_embeddings": 64, "pad_token_id": 0,
                  "bos_token_id": 1, "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}  # fmt: skip
ZOO_TOYS = {
    "seed_oss": {"model_type": "seed_oss", "architectures": ["SeedOssForCausalLM"], **TOY, "head_dim": 32,
                 "attention_out_bias": True, "mlp_bias": True},
    "ministral": {"model_type": "ministral", "architectures": ["MinistralForCausalLM"], **TOY,
                  "num_hidden_layers": 4, "sliding_window": 8,
                  "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"],
                  "head_dim": 16},
    "smollm3": {"model_type": "smollm3", "architectures": ["SmolLM3ForCausalLM"], **TOY, "num_hidden_layers": 4,
                "no_rope_layer_interval": 2, "use_sliding_window": True, "sliding_window": 8, "pad_token_id": None},
    "hunyuan_dense": {"model_type": "hunyuan_v1_dense", "architectures": ["HunYuanDenseV1ForCausalLM"], **TOY,
                      "head_dim": 16, "attention_bias": True},
    "exaone4": {"model_type": "exaone4", "architectures": ["Exaone4ForCausalLM"], **TOY, "num_hidden_layers": 4,
                "sliding_window": 8, "sliding_window_pattern": 2},
    "exaone4_lllg": {"model_type": "exaone4", "architectures": ["Exaone4ForCausalLM"], **TOY, "num_hidden_layers": 4,
                     "sliding_window": 8,
                     "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
                     "head_dim": 32},
    "stablelm": {"model_type": "stablelm", "architectures": ["StableLmForCausalLM"], **TOY, "use_qkv_bias": True,
                 "use_parallel_residual": True},
    "stablelm_seq": {"model_type": "stablelm", "architectures": ["StableLmForCausalLM"], **TOY,
                     "num_key_value_heads": 4},
    "nemotron": {"model_type": "nemotron", "architectures": ["NemotronForCausalLM"], **TOY, "attention_bias": True,
                 "mlp_bias": True},
    "phimoe": {"model_type": "phimoe", "architectures": ["PhimoeForCausalLM"], **TOY, "num_local_experts": 4,
               "attention_bias": True, "lm_head_bias": True},
    "hunyuan_moe": {"model_type": "hunyuan_v1_moe", "architectures": ["HunYuanMoEV1ForCausalLM"], **TOY,
                    "head_dim": 16, "num_experts": 4, "moe_topk": 2},
    "granite": {"model_type": "granite", "architectures": ["GraniteForCausalLM"], **TOY,
                "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.0078125,
                "logits_scaling": 16.0, "tie_word_embeddings": True},
    "granitemoe": {"model_type": "granitemoe", "architectures": ["GraniteMoeForCausalLM"], **TOY,
                   "num_local_experts": 4, "embedding_multiplier": 12.0, "logits_scaling": 6.0},
    "granitemoeshared": {"model_type": "granitemoeshared", "architectures": ["GraniteMoeSharedForCausalLM"], **TOY,
                         "num_local_experts": 4, "shared_intermediate_size": 48},
    "cohere": {"model_type": "cohere", "architectures": ["CohereForCausalLM"], **TOY, "attention_bias": True},
    "cohere2": {"model_type": "cohere2", "architectures": ["Cohere2ForCausalLM"], **TOY, "num_hidden_layers": 4,
                "sliding_window": 8, "sliding_window_pattern": 2},
    "openai-gpt": {"model_type": "openai-gpt", "architectures": ["OpenAIGPTLMHeadModel"], "vocab_size": 100,
                   "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32, "afn": "relu"},
    "gpt-bigcode-mqa": {"model_type": "gpt_bigcode", "architectures": ["GPTBigCodeForCausalLM"], "vocab_size": 100,
                        "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32, "n_inner": 96},
    "gpt-bigcode-mha": {"model_type": "gpt_bigcode", "architectures": ["GPTBigCodeForCausalLM"], "vocab_size": 100,
                        "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32, "multi_query": False,
                        "scale_attn_weights": False, "tie_word_embeddings": False},
    "mpt": {"model_type": "mpt", "architectures": ["MptForCausalLM"], "vocab_size": 100, "d_model": 64, "n_layers": 2,
            "n_heads": 4, "max_seq_len": 32, "attn_config": {"softmax_scale": 0.5}},
    "ernie4_5": {"model_type": "ernie4_5", "architectures": ["Ernie4_5ForCausalLM"], **TOY, "head_dim": None,
                 "use_bias": True, "tie_word_embeddings": False},
    "ernie4_5_moe": {"model_type": "ernie4_5_moe", "architectures": ["Ernie4_5_MoeForCausalLM"], **TOY,
                     "num_hidden_layers": 6, "head_dim": 24, "moe_num_experts": 4, "moe_k": 2,
                     "moe_intermediate_size": 32, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
                     "moe_layer_end_index": 4, "moe_layer_interval": 2},
    "gemma4_text": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **TOY, "num_hidden_layers": 4,
                    "head_dim": 16, "global_head_dim": 32, "num_global_key_value_heads": 1, "attention_k_eq_v": True,
                    "sliding_window": 8, "hidden_size_per_layer_input": 0, "final_logit_softcapping": 30.0,
                    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]},
    "gemma4_text_k_and_v": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **TOY,
                            "num_hidden_layers": 3, "head_dim": 16, "hidden_size_per_layer_input": 0,
                            "num_global_key_value_heads": 1, "tie_word_embeddings": False,
                            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                                "full_attention": {"rope_type": "default", "rope_theta": 1e4}}},
    "dbrx": {"model_type": "dbrx", "architectures": ["DbrxForCausalLM"], "vocab_size": 100, "d_model": 64,
             "n_layers": 2, "n_heads": 4, "max_seq_len": 32, "attn_config": {"kv_n_heads": 2, "rope_theta": 500000.0},
             "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}},
    # encoders (archspec/hf/encoders.py): XLM-RoBERTa's head registered before its encoder, ELECTRA's factorised
    # embeddings (projected, and not) with the generator head, ModernBERT's kinds and biases
    "xlm-roberta": {"model_type": "xlm-roberta", "architectures": ["XLMRobertaForMaskedLM"], **ENCODER_TOY,
                    "max_position_embeddings": 34, "type_vocab_size": 1},
    "electra-generator": {"model_type": "electra", "architectures": ["ElectraForMaskedLM"], **ENCODER_TOY,
                          "embedding_size": 32},
    "electra-discriminator": {"model_type": "electra", "architectures": ["ElectraForPreTraining"], **ENCODER_TOY,
                              "embedding_size": 32, "hidden_act": "relu"},
    "electra-same-width": {"model_type": "electra", "architectures": ["ElectraModel"], **ENCODER_TOY,
                           "embedding_size": 64},
    "modernbert": {**MODERNBERT_TOY, "num_hidden_layers": 5},
    # DeBERTa-v2 without relative attention: absolute positions, the score scale of pos_att_type, both MLM heads
    # (pad_token_id null: transformers' padding warning reads the ids, which the meta device does not hold)
    "deberta-v2-absolute": {"model_type": "deberta-v2", "architectures": ["DebertaV2ForMaskedLM"], **ENCODER_TOY,
                            "pad_token_id": None},
    "deberta-v2-scaled-no-positions": {"model_type": "deberta-v2", "architectures": ["DebertaV2ForMaskedLM"],
                                       **ENCODER_TOY, "pad_token_id": None, "legacy": False,
                                       "position_biased_input": False, "pos_att_type": "p2c|c2p",
                                       "type_vocab_size": 2, "attention_head_size": 16},
    "deberta-v2-model-c2p": {"model_type": "deberta-v2", "architectures": ["DebertaV2Model"], **ENCODER_TOY,
                             "pad_token_id": None, "pos_att_type": ["c2p"]},
    "modernbert-biases-all-global": {**MODERNBERT_TOY, "architectures": ["ModernBertModel"], "norm_bias": True,
                                     "attention_bias": True, "mlp_bias": True, "global_attn_every_n_layers": 1},
    "modernbert-layer-types-head-biases": {**MODERNBERT_TOY, "num_hidden_layers": 3, "classifier_bias": True,
                                           "decoder_bias": False, "norm_bias": True,
                                           "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                                           "rope_parameters": {"full_attention": {"rope_theta": 1000.0},
                                                               "sliding_attention": {"rope_theta": 100.0}}},
}  # fmt: skip
FAST_ZOO = {"seed_oss", "ministral", "hunyuan_moe"}  # three of the zoo in the fast set; every toy in CI


@pytest.mark.parametrize("name", fast_only(sorted(ZOO_TOYS), FAST_ZOO))
def test_zoo_toy_configs_count_and_compute_what_transformers_builds(name):
    raw = ZOO_TOYS[name]
    model = build_transformers(raw)
    expected: dict[str, int] = {}
    for pname, p in model.named_parameters():
        expected[component_of(pname)] = expected.get(component_of(pname), 0) + p.numel()
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, name).data)
    counted = count_params(spec)
    assert {k: v for k, v in counted.components.items() if v} == expected
    if "experts" in expected:
        routed = expected["experts"]
        assert counted.active == sum(expected.values()) - routed + routed * spec.mlp.top_k // spec.mlp.experts
    else:
        assert count_flops(spec, batch=1, seq_len=SEQ).forward == forward_flops(model, spec.kind)


def test_ernie_moe_toy_forward_flops_equal_flop_counter_with_batched_experts():
    """ERNIE 4.5's MoE at toy size (experts on layers 1 and 3 only, by start, end and interval; two shared
    experts' width; the correction bias): transformers' batched_mm experts run on the meta device."""
    raw = ZOO_TOYS["ernie4_5_moe"]
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, "ernie4_5_moe").data)
    assert spec.layers is not None and spec.mlp.correction_bias and spec.mlp.d_shared == 64
    model = build_transformers(raw, experts="batched_mm")
    assert [type(layer.mlp).__name__ for layer in model.model.layers].count("Ernie4_5_MoeSparseMoeBlock") == 2
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == forward_flops(model, "decoder-only")


@pytest.mark.parametrize("name", fast_only(sorted(ZOO_TOYS), FAST_ZOO))
def test_zoo_toy_specs_build_in_the_reference_model_tensor_by_tensor(name):
    """archspec's reference model of each toy spec (NoPE and sliding kinds, post-sublayer norms, QK-norms,
    multipliers, parallel blocks, ALiBi, experts) has every tensor the description has."""
    from archspec.reference import verify

    report = verify(archspec.ModelSpec.model_validate(hf.from_mapping(ZOO_TOYS[name], name).data), seq_len=16)
    assert report.ok and not report.tensor_mismatches


@pytest.mark.parametrize(
    "variant",
    fast_only(["mbart-scaled-relu", "mbart-model", "umt5-tied-scaled-head", "umt5-untied-gated-silu",
               "umt5-no-model-type-untied", "umt5-encoder"], {"mbart-scaled-relu", "umt5-untied-gated-silu"}),
)  # fmt: skip
def test_encoder_decoder_toys_flops_equal_flop_counter_and_build_in_the_reference(variant):
    """mBART's pre-norm stacks with their embedding and final norms, umT5's relative bias table in every layer:
    forward FLOPs (source and target 16 tokens) equal FlopCounterMode on transformers' model, the released
    checkpoint's parameters (umT5's untied head, see as_released) equal archspec's, and archspec's reference
    model has every tensor the description has."""
    from archspec.reference import verify

    raw = VARIANTS[variant]
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, variant).data)
    if raw.get("model_type") == "mbart":
        assert spec.norm_position == "pre" and spec.final_norm and spec.embedding_norm
    else:
        assert spec.position.per_layer
    model = build_transformers(raw)
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == forward_flops(model, spec.kind)
    assert count_params(spec).total == sum(p.numel() for p in as_released(model, raw).parameters())
    report = verify(spec, seq_len=16)
    assert report.ok and not report.tensor_mismatches


@pytest.mark.parametrize("variant", ["mamba2-groups-untied", "mamba2-biases-tied-dt-limit"])
def test_mamba2_toy_specs_build_in_the_reference_model_tensor_by_tensor(variant):
    """A pure Mamba-2 stack (no MLP, no positions, a final norm): archspec's reference model has every tensor the
    description has, as many parameters as transformers' model (the whole model's FLOPs are exempt: a scan)."""
    from archspec.reference import verify

    raw = VARIANTS[variant]
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, variant).data)
    assert spec.attention.kind == "mamba2" and spec.mlp.kind == "none" and spec.position.kind == "none"
    report = verify(spec, seq_len=16)
    assert report.ok and not report.tensor_mismatches
    assert report.params.measured == sum(p.numel() for p in build_transformers(raw).parameters())


# Granite 4.0's hybrids (granitemoehybrid) at toy size: no released config.json was found verbatim (see
# NO_RELEASED_CONFIG_YET). Mamba-2 and attention layers by layer_types, experts beside the shared MLP or the shared
# MLP alone, NoPE or rotary attention, the multipliers, dt clamped to time_step_limit
GRANITE_HYBRID = {"model_type": "granitemoehybrid", "architectures": ["GraniteMoeHybridForCausalLM"], **TOY,
                  "num_hidden_layers": 4, "shared_intermediate_size": 48, "mamba_n_heads": 4,
                  "mamba_d_state": 8}  # fmt: skip
FALCON_H1 = {"model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"], **TOY, "num_key_value_heads": 2}
HYBRID_TOYS = {
    "granitemoehybrid-moe-nope": {**GRANITE_HYBRID, "num_local_experts": 4, "num_experts_per_tok": 2,
                                  "layer_types": ["mamba", "attention", "mamba", "mamba"], "embedding_multiplier": 12.0,
                                  "logits_scaling": 6.0, "residual_multiplier": 0.22,
                                  "attention_multiplier": 0.0078125, "position_embedding_type": "nope",
                                  "tie_word_embeddings": True, "time_step_limit": [0.0, float("inf")]},
    "granitemoehybrid-dense-rope-groups": {**GRANITE_HYBRID, "num_local_experts": 0, "num_experts_per_tok": 0,
                                           "shared_intermediate_size": 80, "mamba_n_heads": 8, "mamba_d_head": 16,
                                           "mamba_n_groups": 2, "layer_types": ["attention", "mamba", "attention",
                                                                                "mamba"],
                                           "position_embedding_type": "rope", "mamba_proj_bias": True,
                                           "mamba_conv_bias": False, "attention_bias": True,
                                           "time_step_limit": [0.001, 100.0]},
    "granitemoehybrid-all-mamba-default-types": {**GRANITE_HYBRID, "num_local_experts": 4, "num_experts_per_tok": 1,
                                                 "mamba_d_conv": 3, "mamba_expand": 1},
    # Falcon-H1: attention and a Mamba-2 mixer side by side in every layer (attention.ssm)
    "falcon-h1-no-mamba-norm-head-dim": {**FALCON_H1, "mamba_d_ssm": 96, "mamba_n_heads": 6, "mamba_d_state": 8,
                                         "head_dim": 8, "attn_layer_indices": None, "mamba_use_mlp": True},
    "falcon-h1-norm-after-gate-biases-tied": {**FALCON_H1, "mamba_d_ssm": None, "mamba_expand": 1,
                                              "mamba_n_heads": 4, "mamba_n_groups": 2, "mamba_d_state": 8,
                                              "mamba_rms_norm": True, "mamba_norm_before_gate": False,
                                              "projectors_bias": True, "mamba_proj_bias": True,
                                              "mamba_conv_bias": False, "attention_bias": True, "mlp_bias": True,
                                              "tie_word_embeddings": True, "key_multiplier": 0.5,
                                              "embedding_multiplier": 2.0, "lm_head_multiplier": 0.25,
                                              "time_step_limit": [0.001, 100.0]},
    "falcon-h1-norm-before-gate-multipliers": {**FALCON_H1, "num_hidden_layers": 3, "mamba_d_ssm": 64,
                                               "mamba_n_heads": 8, "mamba_d_state": 4, "mamba_rms_norm": True,
                                               "mamba_norm_before_gate": True, "ssm_multipliers":
                                               [0.5, 1.0, 1.0, 1.0, 2.0], "mlp_multipliers": [1.5, 0.5],
                                               "attention_in_multiplier": 0.75, "ssm_out_multiplier": 1.25},
}  # fmt: skip


def test_falcon_h1_says_which_multipliers_it_does_not_represent():
    """Falcon-H1's muP multipliers inside the layer scale activations only: counted alike, named in a note; the
    embedding, logit and key multipliers become embedding_scale, head.scale and attention.scale."""
    plain = hf.from_mapping(HYBRID_TOYS["falcon-h1-no-mamba-norm-head-dim"], "plain")
    assert plain.notes == ()
    noted = hf.from_mapping(HYBRID_TOYS["falcon-h1-norm-before-gate-multipliers"], "noted")
    [note] = noted.notes
    assert all(k in note for k in ("attention_in_multiplier", "ssm_out_multiplier", "mlp_multipliers",
                                   "ssm_multipliers")) and "ssm_in_multiplier" not in note  # fmt: skip
    scaled = archspec.ModelSpec.model_validate(hf.from_mapping(HYBRID_TOYS["falcon-h1-norm-after-gate-biases-tied"],
                                                               "scaled").data)  # fmt: skip
    assert (scaled.embedding_scale, scaled.head.scale) == (2.0, 0.25)
    assert scaled.attention.scale == 0.5 / 4 and scaled.attention.ssm.norm == "gated"  # key_multiplier / sqrt(16)
    assert scaled.attention.ssm.bias and scaled.attention.ssm.out_bias and not scaled.attention.ssm.conv_bias


def dense_shared_mlp(raw: dict, components: dict) -> dict:
    """Granite 4.0 without experts: its one MLP is the module transformers names shared_mlp (component 'mlp')."""
    if raw.get("model_type") == "granitemoehybrid" and not raw.get("num_local_experts", 8):
        components = {("mlp" if k == "shared_experts" else k): v for k, v in components.items()}
    return components


@pytest.mark.parametrize("name", sorted(HYBRID_TOYS))
def test_hybrid_toy_configs_count_what_transformers_builds(name):
    """Components, and active parameters (top-k of the routed experts), against transformers' model."""
    raw = HYBRID_TOYS[name]
    expected: dict[str, int] = {}
    for pname, p in build_transformers(raw).named_parameters():
        expected[component_of(pname)] = expected.get(component_of(pname), 0) + p.numel()
    expected = dense_shared_mlp(raw, expected)
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, name).data)
    counted = count_params(spec)
    assert {k: v for k, v in counted.components.items() if v} == expected
    moe = spec.mlp if spec.mlp.kind == "moe" else None
    routed = expected.get("experts", 0)
    assert counted.active == sum(expected.values()) - routed + (routed * moe.top_k // moe.experts if moe else 0)


@pytest.mark.parametrize("name", fast_only(sorted(HYBRID_TOYS), {"falcon-h1-no-mamba-norm-head-dim"}))
def test_hybrid_toy_specs_build_and_run_in_the_reference_model(name):
    """archspec's reference model of each toy spec has every tensor the description has, and runs forward."""
    from archspec.reference import build, verify

    spec = archspec.ModelSpec.model_validate(hf.from_mapping(HYBRID_TOYS[name], name).data)
    report = verify(spec, seq_len=16)
    assert report.ok and not report.tensor_mismatches
    torch.manual_seed(0)
    with torch.no_grad():
        logits = build(spec, device="cpu")(torch.randint(0, spec.vocab_size, (2, 9)))
    assert logits.shape == (2, 9, spec.vocab_size) and torch.isfinite(logits).all()


@pytest.mark.parametrize("name", sorted(HYBRID_TOYS))
def test_hybrid_toy_import_writes_a_spec_file_that_loads_the_same(name, run_cli, tmp_path):
    code, out, err = run_cli("import", _write(tmp_path, HYBRID_TOYS[name]))
    assert code == 0, err
    (tmp_path / "toy.toml").write_text(out)
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(HYBRID_TOYS[name], name).data)
    loaded = archspec.load_spec(tmp_path / "toy.toml")  # named after the folder
    assert loaded == spec.replace(name=loaded.name) and count_params(loaded).total == count_params(spec).total


@pytest.mark.parametrize("name", fast_only(sorted(HYBRID_TOYS), {"falcon-h1-no-mamba-norm-head-dim"}))
def test_hybrid_toy_forward_flops_equal_flop_counter_less_the_scan(name):
    """Forward matmul FLOPs of the whole model (1 x SEQ tokens, CPU, experts batched) against FlopCounterMode on
    transformers' model, less the chunked scan's matmuls (bmm inside each Mamba-2 module, which archspec counts as
    non-matmul recurrence): what each mamba module runs besides its in_proj, out_proj and depthwise conv."""
    from torch.utils.flop_counter import FlopCounterMode

    raw = HYBRID_TOYS[name]
    model = build_transformers(raw, device="cpu", experts="batched_mm")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=torch.zeros(1, SEQ, dtype=torch.long), position_ids=torch.arange(SEQ)[None],
              attention_mask={"full_attention": None, "linear_attention": None})  # fmt: skip
    counts = counter.get_flop_counts()
    scan = 0
    for module, ops in counts.items():
        if module.endswith(".mamba"):
            own = sum(sum(counts.get(f"{module}.{p}", {}).values()) for p in ("in_proj", "out_proj"))
            own += sum(v for op, v in ops.items() if str(op) == "aten.convolution")
            scan += sum(ops.values()) - own
    assert scan > 0
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, name).data)
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == counter.get_total_flops() - scan


def _cache_tensors(cache) -> list:
    """Every tensor transformers' cache holds: keys and values of attention layers, conv and recurrent states."""
    out = []
    for layer in cache.layers:
        for value in vars(layer).values():
            out += [value] if isinstance(value, torch.Tensor) else []
            out += [v for v in value.values() if isinstance(v, torch.Tensor)] if isinstance(value, dict) else []
    return out


@pytest.mark.parametrize(
    ("name", "dtype"), fast_corner(sorted(HYBRID_TOYS), ["fp32", "bf16"], slow=sorted(HYBRID_TOYS)[1:])
)
def test_hybrid_toy_cache_equals_transformers_cache(name, dtype):
    """After a forward over T tokens (CPU, the PyTorch paths): archspec.memory.kv_cache_bytes equals the bytes of
    every tensor in transformers' own cache: keys and values of the attention layers (in the model's dtype), the
    conv state (the model's dtype) and the fp32 recurrent state of each Mamba-2 layer."""
    import warnings

    from archspec.memory import kv_cache_bytes

    raw = HYBRID_TOYS[name]
    torch.manual_seed(0)
    model = build_transformers(raw, device="cpu").to({"fp32": torch.float32, "bf16": torch.bfloat16}[dtype])
    B, T = 2, 7
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # explicit positions and masks (none; the cache does not depend on them): transformers asks an attention layer
        # of the cache for the length, which an all-Mamba model lacks
        masks = {"full_attention": None, "linear_attention": None}
        out = model(input_ids=torch.randint(0, raw["vocab_size"], (B, T)), position_ids=torch.arange(T)[None],
                    attention_mask=masks, use_cache=True)  # fmt: skip
    cache = getattr(out, "cache", None) or out.past_key_values
    held = sum(t.numel() * t.element_size() for t in _cache_tensors(cache))
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, name).data)
    assert kv_cache_bytes(spec, B, T, dtype) == held > 0


# 2-layer variants of the hybrids without a recurrent layer (attention, dense or no MLP): their forward FLOPs
# equal FlopCounterMode on transformers' model; with a scan the whole model is exempt (SCAN)
NO_SCAN = {
    "qwen3-next-attention-dense": {**raw_config("qwen3-next-80b-a3b-thinking"), "num_hidden_layers": 2,
                                   "layer_types": ["full_attention", "full_attention"], "mlp_only_layers": [0, 1]},
    "nemotron-h-attention-mlp": {**raw_config("nemotron-h-56b-base-8k"), "hybrid_override_pattern": "*-",
                                 "num_hidden_layers": 2},
    "granitemoehybrid-attention-dense": {**GRANITE_HYBRID, "num_hidden_layers": 2, "num_local_experts": 0,
                                         "layer_types": ["attention", "attention"], "position_embedding_type": "rope",
                                         "embedding_multiplier": 12.0, "logits_scaling": 6.0},
}  # fmt: skip


@pytest.mark.parametrize("variant", sorted(NO_SCAN))
def test_hybrid_variants_without_a_scan_match_flop_counter(variant):
    raw = NO_SCAN[variant]
    model = build_transformers(raw)
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, variant).data)
    assert count_params(spec).total == sum(p.numel() for p in model.parameters())
    # no attention_mask: transformers' hybrid masks read its values, which the meta device does not hold
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=torch.zeros(1, SEQ, dtype=torch.long, device="meta"))
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == counter.get_total_flops()


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


def test_t5_head_follows_the_file_as_the_released_checkpoint_does():
    """tie_word_embeddings: false is a separate lm_head in the checkpoint (Flan-T5, T5 v1.1, mT5), though
    transformers 5 ties it; the note says so. mT5-base: 582,401,280 (the issue's checkpoint figure), which
    is transformers' tied model plus one 250,112 x 768 head."""
    imported = loading.import_config(DATA / "flan-t5-xxl.json")
    assert imported.data["tie_embeddings"] is False and "head" not in imported.data  # no d_model**-0.5 rescale
    assert len(imported.notes) == 1 and "separate lm_head" in imported.notes[0]
    assert count_params(spec_of("flan-t5-xxl")).total == 11_135_332_352
    tied = spec_of("flan-t5-xxl").replace(tie_embeddings=True)
    assert count_params(spec_of("flan-t5-xxl")).total - count_params(tied).total == 32128 * 4096
    transformers_tied = build_transformers(raw_config("mt5-base"))
    assert transformers_tied.lm_head.weight is transformers_tied.shared.weight  # what transformers 5 builds
    tied_total = sum(p.numel() for p in transformers_tied.parameters())
    assert count_params(spec_of("mt5-base")).total == tied_total + 250112 * 768 == 582_401_280
    assert count_params(spec_of("t5-base")).total == measured("t5-base")["total"] == 222_903_552  # tied: no note
    assert loading.import_config(DATA / "t5-base.json").notes == ()


def test_falcon_legacy_keys_read_as_the_new_ones():
    assert spec_of("falcon-7b-legacy-keys").replace(name="falcon-7b-instruct") == spec_of("falcon-7b-instruct")


def test_bloom_legacy_n_embed_reads_as_hidden_size():
    assert spec_of("bloom-176b-bloomz").replace(name="bloomchat-176b") == spec_of("bloomchat-176b")


# ---------------------------------------------------------------- import writes a spec that counts the same


@pytest.mark.parametrize("name", fast_only(COUNTED, FAST))
def test_imported_spec_file_loads_to_the_same_spec(name, run_cli, tmp_path):
    code, out, err = run_cli("import", str(DATA / f"{name}.json"))
    assert code == 0, err
    path = tmp_path / f"{name}.toml"
    path.write_text(out)
    loaded = archspec.load_spec(path)
    assert loaded == spec_of(name)
    assert count_params(loaded).total == measured(name)["total"]


@pytest.mark.parametrize("name", ["jamba-v0.1", "deepseek-v3", "gemma-2-9b"])
def test_import_names_the_mixer_and_the_older_name_loads_the_same(name, run_cli, tmp_path):
    """`archspec import` writes the token mixer as `mixer` (a hybrid's kinds too); the same file saying
    `attention`, as files written before the name, loads to the same spec."""
    code, out, err = run_cli("import", str(DATA / f"{name}.json"))
    assert code == 0 and ("[mixer]" in out or "mixer = " in out) and "attention =" not in out, err
    assert "[attention]" not in out
    newer, older = tmp_path / "newer.toml", tmp_path / "older.toml"
    newer.write_text(out)
    older.write_text(out.replace("[mixer]", "[attention]").replace("mixer = ", "attention = "))
    assert archspec.load_spec(newer) == archspec.load_spec(older) == spec_of(name)


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
    code, out, err = run_cli("import", str(DATA / "flan-t5-xxl.json"), "--set", "tie_embeddings=true")
    assert code == 0 and "tie_embeddings = false" not in out
    assert "note:" in err  # the tying note goes to stderr as well as into the file
    path = tmp_path / "flan.toml"
    path.write_text(out)
    assert count_params(archspec.load_spec(path)).total == 11_003_736_064  # transformers 5's tied model


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


@pytest.mark.slow
def test_one_params_call_counts_every_config(run_json):
    readable = COUNTED
    objects = run_json("params", *(str(DATA / f"{c}.json") for c in readable))
    assert [o["name"] for o in objects] == readable
    assert [o["total"] for o in objects] == [measured(c)["total"] for c in readable]


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
        ({"model_type": "mystery", "architectures": ["MysteryForCausalLM"]}, "model_type 'mystery' has no adapter"),
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
        (
            {"model_type": "nemotron_h", "hybrid_override_pattern": "M*X"},
            "nemotron_h key hybrid_override_pattern='M*X' is not supported",
        ),
        ({"model_type": "nemotron_h", "moe_latent_size": 64}, "nemotron_h key moe_latent_size=64 is not supported"),
        ({"model_type": "nemotron_h", "mlp_bias": True}, "nemotron_h key mlp_bias=True is not supported"),
        (
            {"model_type": "qwen3_next", "layer_types": ["sliding_attention"]},
            "qwen3_next key layer_types=['sliding_attention'] is not supported",
        ),
        ({"model_type": "qwen3_5_moe_text", "num_experts": 0}, "qwen3_5_moe_text key num_experts=0 is not supported"),
        ({"model_type": "glm4_moe", "n_routed_experts": 0}, "glm4_moe key n_routed_experts=0 is not supported"),
        (
            {"model_type": "olmo3", "num_hidden_layers": 2, "layer_types": ["sliding_attention", "linear_attention"]},
            "olmo3 key layer_types=['sliding_attention', 'linear_attention'] is not supported",
        ),
        ({"model_type": "olmoe", "num_experts": 0}, "olmoe key num_experts=0 is not supported"),
        (
            {"model_type": "minimax_m2", "shared_intermediate_size": 512},
            "minimax_m2 key shared_intermediate_size=512 is not supported",
        ),
        (
            {"model_type": "deepseek_v32", "num_hidden_layers": 2, "mlp_layer_types": ["sparse", "dense"]},
            "deepseek_v32 key mlp_layer_types=['sparse', 'dense'] is not supported",
        ),
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
        ({"model_type": "kimi_k3", "architectures": ["KimiK3ForCausalLM"]}, "model_type 'kimi_k3' has no adapter"),
        ('{"model_type": "qwen3", "rope_theta": Infinity}', "spec field position.base a non-finite value"),
        (
            {"model_type": "gpt_oss", "num_hidden_layers": 1, "layer_types": ["chunked_attention"]},
            "layer_types entry 'chunked_attention' is not supported",
        ),
        ({"model_type": "llama", "architectures": "LlamaForCausalLM"}, "architectures must be a list of class names"),
        ({"model_type": "gptj", "n_head": "sixteen"}, "gptj key n_head='sixteen' is not a number"),
        ({"model_type": "llama", "hidden_size": "4096"}, "llama key hidden_size='4096' is not a number; write it"),
        ('{"model_type": "llama",', "malformed JSON"),
        ("[1, 2]", "not list"),
        ({"model_type": "stablelm", "qk_layernorm": True}, "stablelm key qk_layernorm=True is not supported"),
        ({"model_type": "cohere", "use_qk_norm": True}, "cohere key use_qk_norm=True is not supported"),
        ({"model_type": "cohere2", "sliding_window_pattern": 0}, "cohere2 key sliding_window_pattern=0"),
        ({"model_type": "ministral", "layer_types": ["chunked_attention"]}, "ministral key layer_types="),
        ({"model_type": "exaone4", "sliding_window_pattern": "LLXG"}, "exaone4 key sliding_window_pattern='LLXG'"),
        ({"model_type": "smollm3", "no_rope_layers": [1, 2]}, "smollm3 key no_rope_layers=[1, 2]"),
        ({"model_type": "hunyuan_v1_moe", "num_experts": [4, 8]}, "hunyuan_v1_moe key num_experts=[4, 8]"),
        ({"model_type": "mpt", "expansion_ratio": 2}, "mpt key expansion_ratio=2 is not supported"),
        ({"model_type": "mpt", "attn_config": {"qk_ln": True}}, "mpt key attn_config.qk_ln=True is not supported"),
        (
            {"model_type": "dbrx", "ffn_config": {"moe_normalize_expert_weights": 2}},
            "dbrx key ffn_config.moe_normalize_expert_weights=2 is not supported",
        ),
        ({"model_type": "gpt_bigcode", "add_cross_attention": True}, "gpt_bigcode key add_cross_attention=True"),
        ({"model_type": "mbart", "tie_word_embeddings": False}, "mbart key tie_word_embeddings=False is not supported"),
        ({"model_type": "mbart", "decoder_attention_heads": 8}, "mbart key decoder_attention_heads=8 is not supported"),
        ({"model_type": "umt5", "feed_forward_proj": "gated-tanh"}, "feed_forward_proj='gated-tanh' is not supported"),
        ({"model_type": "mamba2", "expand": 3}, "mamba2 key expand=3 is not supported"),
        ({"model_type": "mamba2", "hidden_act": "gelu"}, "mamba2 key hidden_act='gelu' is not supported"),
        ({"model_type": "mamba2", "time_step_limit": [0.1]}, "mamba2 key time_step_limit=[0.1] is not supported"),
        ({"model_type": "mamba2", "rms_norm": False}, "mamba2 key rms_norm=False is not supported"),
        (
            {"model_type": "granitemoehybrid", "num_hidden_layers": 2, "layer_types": ["mamba", "conv"]},
            "granitemoehybrid key layer_types=['mamba', 'conv'] is not supported",
        ),
        (
            {"model_type": "granitemoehybrid", "position_embedding_type": "alibi"},
            "granitemoehybrid key position_embedding_type='alibi' is not supported",
        ),
        ({"model_type": "granitemoehybrid", "hidden_act": "gelu"}, "granitemoehybrid key hidden_act='gelu'"),
        (
            {"model_type": "granitemoehybrid", "time_step_limit": [0.1, 0.01]},
            "granitemoehybrid key time_step_limit=[0.1, 0.01] is not supported",
        ),
        ({"model_type": "falcon_h1", "hidden_act": "gelu"}, "falcon_h1 key hidden_act='gelu' is not supported"),
        (
            {"model_type": "falcon_h1", "mamba_d_ssm": 64, "mamba_n_heads": 4, "mamba_d_head": 8},
            "falcon_h1 key mamba_d_head=8 is not supported",
        ),
        ({"model_type": "falcon_h1", "time_step_limit": [-1.0, 1.0]}, "falcon_h1 key time_step_limit=[-1.0, 1.0]"),
        ({"model_type": "falcon_h1", "ssm_multipliers": [1.0]}, "falcon_h1 key ssm_multipliers=[1.0] is not"),
        ({"model_type": "falcon_h1", "attn_layer_indices": [1, 3]}, "falcon_h1 key attn_layer_indices=[1, 3]"),
        ({"model_type": "falcon_h1", "mamba_use_mlp": False}, "falcon_h1 key mamba_use_mlp=False is not supported"),
        (
            {
                "model_type": "modernbert",
                "num_hidden_layers": 2,
                "layer_types": ["full_attention", "chunked_attention"],
            },
            "modernbert key layer_types=['full_attention', 'chunked_attention'] is not supported",
        ),
        (
            {"model_type": "modernbert", "global_attn_every_n_layers": 0},
            "modernbert key global_attn_every_n_layers=0 is not supported",
        ),
        ({"model_type": "modernbert", "tie_word_embeddings": False}, "modernbert key tie_word_embeddings=False"),
        ({"model_type": "electra", "is_decoder": True}, "electra key is_decoder=True is not supported"),
        (
            {"model_type": "bert", "architectures": ["BertForPreTraining"]},
            "architecture 'BertForPreTraining' is not supported for model_type 'bert'",
        ),
        ({"model_type": "xlm-roberta", "add_cross_attention": True}, "xlm-roberta key add_cross_attention=True"),
        (
            {"model_type": "deberta-v2", "relative_attention": True, "position_biased_input": False},
            "deberta-v2 key relative_attention=True is not supported (relative attention without a c2p or p2c",
        ),
        (
            {"model_type": "deberta-v2", "relative_attention": True, "pos_att_type": ["c2p"]},
            "deberta-v2 key position_biased_input=True is not supported",
        ),
        ({"model_type": "deberta-v2", "conv_kernel_size": 3}, "deberta-v2 key conv_kernel_size=3 is not supported"),
        ({"model_type": "deberta-v2", "norm_rel_ebd": "layer_norm"}, "deberta-v2 key norm_rel_ebd='layer_norm'"),
        ({"model_type": "deberta-v2", "embedding_size": 128}, "deberta-v2 key embedding_size=128 is not supported"),
        ({"model_type": "deberta-v2", "attention_head_size": 32}, "deberta-v2 key attention_head_size=32 is not"),
        ({"model_type": "deberta-v2", "pos_att_type": "p2p|c2p"}, "deberta-v2 key pos_att_type='p2p|c2p' is not"),
        ({"model_type": "ernie4_5_moe", "use_bias": True}, "ernie4_5_moe key use_bias=True is not supported"),
        ({"model_type": "gemma4_text"}, "gemma4_text key hidden_size_per_layer_input=256 is not supported"),
        (
            {"model_type": "gemma4", "text_config": {"hidden_size_per_layer_input": 0, "num_kv_shared_layers": 4}},
            "gemma4_text key num_kv_shared_layers=4 is not supported",
        ),
        (
            {"model_type": "gemma4_text", "hidden_size_per_layer_input": 0, "use_bidirectional_attention": "all"},
            "gemma4_text key use_bidirectional_attention='all' is not supported",
        ),
        (
            {
                "model_type": "gemma4_text",
                "hidden_size_per_layer_input": 0,
                "rope_parameters": {"full_attention": {"rope_type": "yarn"}, "sliding_attention": {}},
            },
            "rope_parameters.full_attention.rope_type='yarn' is not supported",
        ),
        (
            {"model_type": "ernie4_5_moe", "moe_layer_interval": 0},
            "ernie4_5_moe key moe_layer_interval=0 is not supported",
        ),
        (
            {"model_type": "jamba", "mamba_inner_layernorms": False},
            "jamba key mamba_inner_layernorms=False is not supported",
        ),
    ],
    ids=str.split(
        "unknown-type unknown-class no-type albert-groups activation t5-activation bart-ffn bart-untied "
        "qwen-moe-layers nemotron-pattern nemotron-latent nemotron-expert-bias qwen3-next-types "
        "qwen3.5-no-experts glm4-moe-no-experts olmo3-layer-types olmoe-no-experts minimax-m2-shared "
        "deepseek-v32-layer-types type-not-a-string qwen3-layer-types qwen3-moe-step gpt-oss-alpha "
        "llama4-step wrapper-text-type wrapper-text-not-object wrapper-class no-text-model "
        "gemma3-bidirectional alias-no-class non-finite-shape gpt-oss-layer-types classes-not-a-list "
        "wrong-type-in-arithmetic wrong-type-of-field malformed not-an-object stablelm-qk-norm cohere-qk-norm "
        "cohere2-pattern ministral-layer-types exaone4-pattern smollm3-no-rope hunyuan-moe-per-layer mpt-ffn "
        "mpt-qk-ln dbrx-normalize bigcode-cross mbart-untied mbart-heads umt5-activation mamba2-expand mamba2-act "
        "mamba2-dt-limit mamba2-layernorm granite-hybrid-types granite-hybrid-positions granite-hybrid-act "
        "granite-hybrid-dt-limit falcon-h1-act falcon-h1-head-dim falcon-h1-dt-limit falcon-h1-multipliers "
        "falcon-h1-attention-layers falcon-h1-no-mlp modernbert-layer-types modernbert-every modernbert-untied "
        "electra-decoder bert-pretraining xlm-roberta-cross deberta-no-terms "
        "deberta-absolute-and-relative deberta-conv deberta-rel-norm deberta-embedding-size "
        "deberta-head-size deberta-att-type "
        "ernie-moe-bias ernie-moe-interval gemma4-ple gemma4-kv-shared gemma4-bidirectional gemma4-rope-type "
        "jamba-inner-norms"
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


def test_unknown_model_type_lists_the_supported_ones(tmp_path):
    """Reading the file as a spec (no transformers involved) names every supported type; the CLI's
    params, compare and flops measure such a file instead (tests/test_hf_fallback.py)."""
    with pytest.raises(archspec.SpecError) as err:
        archspec.load_spec(_write(tmp_path, {"model_type": "rwkv"}))
    assert all(t in str(err.value) for t in hf.FAMILIES) and len(hf.FAMILIES) >= 26


# model types whose released config.json was not found (searched: GitHub copies of hub files, vendor and serving
# repositories; see tests/data/hf/SOURCES.md): tested from transformers' defaults and ZOO_TOYS only
NO_RELEASED_CONFIG_YET = {
    # ministral: no released checkpoint says model_type ministral (Ministral-8B-Instruct-2410's file says mistral)
    "ministral", "hunyuan_v1_moe", "granitemoeshared", "cohere2", "mamba2", "falcon_h1",
}  # fmt: skip


def test_every_supported_model_type_has_a_real_config_in_the_test_set():
    types = {_model_type(c) for c in COUNTED}
    assert not types & NO_RELEASED_CONFIG_YET, "a released config arrived: take its type off NO_RELEASED_CONFIG_YET"
    assert types | NO_RELEASED_CONFIG_YET == set(hf.FAMILIES)


def test_params_mtp_counts_the_multi_token_prediction_modules(run_json, run_cli):
    """GLM-4.5-Air's one MTP layer: left out by default (transformers does not build it), counted with --mtp
    as the spec's description of it; a value given to the flag is bad input."""
    [plain] = run_json("params", "glm-4.5-air")
    [with_mtp] = run_json("params", "glm-4.5-air", "--mtp")
    assert plain["total"] == measured("glm-4.5-air")["total"] and plain["components"]["mtp"] == 0
    assert (
        with_mtp["total"] - plain["total"]
        == with_mtp["components"]["mtp"]
        == count_params(spec_of("glm-4.5-air"), mtp=True).components["mtp"]
        > 0
    )
    code, out, err = run_cli("params", "glm-4.5-air", "--mtp=yes")
    assert code == 2 and out == "" and err.count("\n") == 1 and "--mtp" in err


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


# one file of each wrapper in the fast set
FAST_WRAPPED = {"gemma-4-26b-a4b", "llama-4-scout-17b-16e-instruct", "qwen3.5-35b-a3b"}


@pytest.mark.parametrize("name", fast_only(sorted(WRAPPED), FAST_WRAPPED))
def test_a_wrapper_counts_the_text_model_transformers_builds_from_its_text_config(name):
    """The causal-LM class of the text config's type, built from text_config alone (see build_text_model)."""
    model = build_text_model(raw_config(name))
    assert count_params(spec_of(name)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", fast_only(sorted(WRAPPED), FAST_WRAPPED))
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


# ---------------------------------------------------------------- encoders of 2020-2024: ELECTRA, ModernBERT


@pytest.mark.parametrize(
    "options",
    [{}, {"norm_bias": True, "attention_bias": True, "mlp_bias": True, "classifier_bias": True, "decoder_bias": False,
          "global_attn_every_n_layers": 2, "global_rope_theta": 5000.0}],
    ids=["defaults", "biases-every-2nd-global"],
)  # fmt: skip
def test_modernbert_reference_model_computes_what_transformers_computes(options):
    """ModernBERT at toy size, transformers' weights copied into archspec's reference model: the same logits
    over 24 tokens, so the layer kinds hold what transformers runs: the local layers' bidirectional window
    (|i - j| <= local_attention / 2, the spec's sliding_window local_attention / 2 + 1), the rotary base of
    each kind, no norm before the first layer's attention, GeGLU from the fused Wi (its first half activated),
    the head's biases."""
    from archspec.reference import build

    raw = {**MODERNBERT_TOY, **options}
    theirs = build_transformers(raw, device="cpu")
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, "modernbert-toy").data)
    ours = build(spec, device="cpu").eval()
    d_ff = raw["intermediate_size"]
    names = {"embed.weight": "model.embeddings.tok_embeddings.weight", "head.bias": "decoder.bias"}
    for n in dict(ours.named_parameters()):
        if n in names:
            continue
        n_t = n.replace("encoder.embedding_norm", "model.embeddings.norm").replace("encoder.final_norm",
                                                                                  "model.final_norm")  # fmt: skip
        n_t = re.sub(r"^encoder\.layers", "model.layers", n_t)
        for a, b in ((".attention_norm.", ".attn_norm."), (".attention.qkv.", ".attn.Wqkv."),
                     (".attention.out.", ".attn.Wo."), (".mlp.down.", ".mlp.Wo.")):  # fmt: skip
            n_t = n_t.replace(a, b)
        names[n] = n_t
    state = dict(theirs.named_parameters())
    with torch.no_grad():
        for n, p in ours.named_parameters():
            if ".mlp.gate." in n or ".mlp.up." in n:  # Wi's first half is activated (the gate), its second the up
                half = 0 if ".mlp.gate." in n else 1
                wi = state[re.sub(r"\.mlp\.(gate|up)\.", ".mlp.Wi.", names[n].replace("encoder.", "model."))]
                p.copy_(wi[half * d_ff : (half + 1) * d_ff])
            else:
                p.copy_(state[names[n]])
    tokens = torch.randint(0, raw["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = theirs(input_ids=tokens).logits
        assert torch.allclose(ours(tokens), expected, atol=1e-5, rtol=1e-4)
        plain = spec.replace(kinds={}, layers=None)  # every layer global and normed: not what transformers runs
        other = build(plain, device="cpu").eval()
        other.load_state_dict(ours.state_dict(), strict=False)
        assert not torch.allclose(other(tokens), expected, atol=1e-3)


# DeBERTa-v2/v3's disentangled attention at toy size: buckets below the 24 tokens run (log-bucketed distances) with
# the layers' own projections (share_att_key) and both terms; no buckets, distances clipped at 6, pos_key /
# pos_query of each layer, token types; one term alone, no table norm, transformers' non-legacy head
DEBERTA_TOYS = {
    "v3-like": {"position_buckets": 8, "pos_att_type": "p2c|c2p", "share_att_key": True, "norm_rel_ebd": "layer_norm"},
    "v2-own-projections-clipped": {"max_relative_positions": 6, "pos_att_type": ["c2p", "p2c"], "type_vocab_size": 2},
    "c2p-only-no-norm-non-legacy": {"position_buckets": 4, "pos_att_type": ["c2p"], "share_att_key": True,
                                    "legacy": False},
}  # fmt: skip


def _deberta_toy(options: dict, cls: str = "DebertaV2ForMaskedLM") -> dict:
    return {"model_type": "deberta-v2", "architectures": [cls], **ENCODER_TOY, "pad_token_id": 0,
            "relative_attention": True, "position_biased_input": False, **options}  # fmt: skip


def _copy_deberta_weights(theirs, ours) -> None:
    """transformers' DebertaV2ForMaskedLM (legacy head) weights into archspec's reference model."""
    state = dict(theirs.named_parameters())
    fixed = {"embed.weight": "deberta.embeddings.word_embeddings.weight", "token_type.weight":
             "deberta.embeddings.token_type_embeddings.weight", "encoder.position.weight":
             "deberta.encoder.rel_embeddings.weight", "head.bias": "cls.predictions.bias"}  # fmt: skip
    prefixes = {"encoder.embedding_norm.": "deberta.embeddings.LayerNorm.", "encoder.position_norm.":
                "deberta.encoder.LayerNorm.", "head.dense.": "cls.predictions.transform.dense.",
                "head.norm.": "cls.predictions.transform.LayerNorm."}  # fmt: skip
    layer = {
        "attention.out": "attention.output.dense",
        "attention_norm": "attention.output.LayerNorm",
        "mlp.up": "intermediate.dense",
        "mlp.down": "output.dense",
        "mlp_norm": "output.LayerNorm",
        "attention.pos_key": "attention.self.pos_key_proj",
        "attention.pos_query": "attention.self.pos_query_proj",
    }
    with torch.no_grad():
        for n, p in ours.named_parameters():
            if n in fixed:
                p.copy_(state[fixed[n]])
                continue
            prefix = next((k for k in prefixes if n.startswith(k)), None)
            if prefix is not None:
                p.copy_(state[prefixes[prefix] + n[len(prefix) :]])
                continue
            i, module, w = re.match(r"encoder\.layers\.(\d+)\.(.*)\.(weight|bias)$", n).groups()
            at = f"deberta.encoder.layer.{i}."
            if module == "attention.qkv":
                p.copy_(torch.cat([state[f"{at}attention.self.{x}_proj.{w}"] for x in ("query", "key", "value")]))
            else:
                p.copy_(state[f"{at}{layer[module]}.{w}"])


@pytest.mark.parametrize("toy", sorted(DEBERTA_TOYS))
def test_deberta_disentangled_attention_counts_computes_and_runs_what_transformers_does(toy):
    """Components, forward FLOPs (the table's projections once per pass, q · k_pos and k · q_pos over every relative
    row) and the reference model tensor by tensor; with the legacy head, transformers' weights copied into the
    reference model give the same logits over 24 tokens (buckets and clipping exercised). transformers' model runs
    with gradients on: under no_grad, FlopCounterMode's module tracker cannot hook the relative table's LayerNorm,
    whose input is a parameter."""
    from torch.utils.flop_counter import FlopCounterMode

    from archspec.reference import build, verify

    raw = _deberta_toy(DEBERTA_TOYS[toy])
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, toy).data)
    assert spec.position.kind == "disentangled"
    theirs = build_transformers(raw)
    expected: dict[str, int] = {}
    for pname, p in theirs.named_parameters():
        expected[component_of(pname)] = expected.get(component_of(pname), 0) + p.numel()
    assert {k: v for k, v in count_params(spec).components.items() if v} == expected
    with FlopCounterMode(display=False) as counter:
        ones = torch.ones(1, SEQ, dtype=torch.long, device="meta")  # a mask: the padding check reads the ids
        theirs(input_ids=ones * 0, attention_mask=ones)
    assert count_flops(spec, batch=1, seq_len=SEQ).forward == counter.get_total_flops()
    report = verify(spec, seq_len=SEQ)
    assert report.ok and not report.tensor_mismatches
    if raw.get("legacy", True):
        theirs, ours = build_transformers(raw, device="cpu"), build(spec, device="cpu").eval()
        _copy_deberta_weights(theirs, ours)
        tokens = torch.randint(0, raw["vocab_size"], (2, 24), generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            assert torch.allclose(ours(tokens), theirs(input_ids=tokens).logits, atol=1e-5, rtol=1e-4)


def test_deberta_v3_base_shape_counts_what_transformers_builds():
    """microsoft/deberta-v3-base's shape (the keys of its hub file, which was found only re-saved): 183,831,552
    parameters in DebertaV2Model (transformers' count), a bucketed table of 512 rows shared by 12 layers."""
    raw = _deberta_toy({"position_buckets": 256, "pos_att_type": ["p2c", "c2p"], "share_att_key": True,
                        "norm_rel_ebd": "layer_norm", "vocab_size": 128100, "hidden_size": 768,
                        "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                        "max_position_embeddings": 512, "max_relative_positions": -1, "type_vocab_size": 0},
                       "DebertaV2Model")  # fmt: skip
    spec = archspec.ModelSpec.model_validate(hf.from_mapping(raw, "deberta-v3-base-shape").data)
    expected = sum(p.numel() for p in build_transformers(raw).parameters())
    assert count_params(spec).total == expected == 183_831_552
    assert spec.position.span == 256 and count_params(spec).components["position"] == 512 * 768


def test_a_class_named_as_the_checkpoints_own_code_spells_it_is_transformers_class_and_says_so(run_cli, tmp_path):
    """Phi-3.5-MoE's released file names PhiMoEForCausalLM (its auto_map's remote code); transformers builds
    PhimoeForCausalLM for model_type phimoe, and archspec counts that and says so. A class of another
    head, spelled either way, is still refused by name."""
    [obj] = json.loads(run_cli("params", str(DATA / "phi-3.5-moe-instruct.json"), "--format", "json")[1])
    assert obj["total"] == measured("phi-3.5-moe-instruct")["total"]
    assert any("PhiMoEForCausalLM" in n and "PhimoeForCausalLM" in n for n in obj["notes"])
    raw = {**raw_config("phi-3.5-moe-instruct"), "architectures": ["PhiMoEForTokenClassification"]}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    code, out, err = run_cli("params", str(tmp_path / "config.json"))
    assert code == 2 and not out and err.count("\n") == 1 and "PhiMoEForTokenClassification" in err


def test_a_file_that_names_no_class_is_counted_as_its_familys_first_and_says_so(run_cli, tmp_path):
    """DeBERTa-v3-base's hand-written file has no `architectures`: archspec counts DebertaV2ForMaskedLM (the
    masked-LM head, the class transformers builds for it by the adapter's first suffix) and says which, naming
    the other class; a file whose class names the bare model counts that, without the note."""
    [obj] = json.loads(run_cli("params", str(DATA / "deberta-v3-base.json"), "--format", "json")[1])
    raw = raw_config("deberta-v3-base")
    assert "architectures" not in raw
    assert obj["total"] == measured("deberta-v3-base")["total"]
    assert any("no architectures" in n and "DebertaV2ForMaskedLM" in n and "DebertaV2Model" in n for n in obj["notes"])
    for archs, counted in (([""], "DebertaV2ForMaskedLM"), (["DebertaV2Model"], "DebertaV2Model")):
        (tmp_path / "config.json").write_text(json.dumps({**raw, "architectures": archs}))
        [other] = json.loads(run_cli("params", str(tmp_path / "config.json"), "--format", "json")[1])
        expected = sum(p.numel() for p in build_transformers({**raw, "architectures": [counted]}).parameters())
        assert other["total"] == expected
        assert any("no architectures" in n for n in other.get("notes") or []) == (archs == [""])


def test_files_verified_by_hash_are_the_bytes_the_hub_record_names():
    """tests/data/hf/SOURCES.md's "verified by the hub file's hash" rows: each file's sha256 is the one the
    record gives for the hub file at its commit, or for ModelScope's mirror of it (an edit to a file,
    even of its layout, fails here)."""
    import hashlib

    text = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    section = text.split("## Files verified by the hub file's hash", 1)[1].split("\n## ", 1)[0]
    # the record names a commit, or ModelScope's mirror of the repository (its master)
    row = r"^\| `([^`]+\.json)` \|.*?\| (?:`([0-9a-f]{40})`|ModelScope [^|]+) \| `([0-9a-f]{64})` \|"
    rows = re.findall(row, section, re.M)
    # copies and files typed from hub pages whose hash a record also gives ("sha256 `...`" in their row)
    copies, typed = text.split("## Files typed from the hub's own pages", 1)
    typed = typed.split("\n## ", 1)[0]
    for table in (copies, typed):
        rows += [(n, None, d) for n, d in re.findall(r"^\| `([^`]+\.json)` \|.*?sha256 `([0-9a-f]{64})`", table, re.M)]
    assert len(rows) >= 16
    for name, _commit, digest in rows:
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
