"""Presets: names, provenance, and the architecture choices the papers print."""

import re
from pathlib import Path

import pytest

import archspec
from archspec.io.catalog import get_preset

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"
EXPECTED = [
    "transformer-base",
    "transformer-big",
    "gpt2",
    "gpt2-medium",
    "gpt2-large",
    "gpt2-xl",
    "gpt3-small",
    "gpt3-medium",
    "gpt3-large",
    "gpt3-xl",
    "gpt3-2.7b",
    "gpt3-6.7b",
    "gpt3-13b",
    "gpt3-175b",
    "bert-base",
    "bert-large",
]


def test_every_required_preset_exists():
    assert set(EXPECTED) <= set(archspec.presets())


@pytest.mark.parametrize("name", EXPECTED)
def test_preset_name_appears_literally_in_a_family_file(name):
    text = "".join(p.read_text() for p in PRESET_DIR.glob("*.toml"))
    assert re.search(rf'\[models\.("{re.escape(name)}"|{re.escape(name)})\]', text)


@pytest.mark.parametrize("name", archspec.presets())
def test_every_preset_has_a_source_and_a_claim(name):
    p = get_preset(name)
    assert p.source and p.summary
    assert any(c["quantity"] == "params" for c in p.claims_data)


@pytest.mark.parametrize("path", sorted(PRESET_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_number_in_a_family_file_carries_a_provenance_comment(path):
    """Spec fields under [defaults] and [models.X] carry a '# source' comment on their line."""
    from archspec.spec.model import ModelSpec

    fields = set(ModelSpec.model_fields)
    section = None
    for line in path.read_text().splitlines():
        if line.startswith("["):
            section = line
            continue
        key = line.split("=", 1)[0].strip()
        in_spec_table = section and (
            section == "[defaults]"
            or (section.startswith("[models.") and section.count("[") == 1 and not section.endswith(".printed]"))
        )
        if in_spec_table and key in fields:
            assert "#" in line, f"{path.name}: {line!r} has no provenance comment"


def test_transformer_follows_vaswani_2017():
    s = archspec.preset("transformer-base")
    assert (s.encoder_layers, s.decoder_layers, s.d_model, s.d_ff, s.n_heads, s.d_head) == (6, 6, 512, 2048, 8, 64)
    assert (s.norm_position, s.final_norm, s.activation, s.position.kind, s.tie_embeddings) == (
        "post",
        False,
        "relu",
        "sinusoidal",
        True,
    )
    assert s.vocab_size == 37000


def test_gpt3_contradictory_rows_record_what_was_printed():
    xl, b13 = get_preset("gpt3-xl"), get_preset("gpt3-13b")
    assert xl.printed["n_heads"] == 24 and xl.spec.n_heads * xl.spec.d_head == xl.spec.d_model == 2048
    assert b13.printed["d_model"] == 5140 and b13.spec.d_model == 5120 == 40 * 128


@pytest.mark.parametrize("name", archspec.presets())
def test_packaged_presets_are_valid(name):
    """A preset's spec is its data validated as a spec file's is, with the fields it gives and no others."""
    from archspec.spec.model import ModelSpec

    p = get_preset(name)
    validated = ModelSpec.model_validate(p.spec_data)
    assert validated == p.spec
    assert validated.model_fields_set == p.spec.model_fields_set


@pytest.mark.parametrize("path", sorted(PRESET_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_name_index_agrees_with_the_parsed_files(path):
    """The catalog finds a preset's file by its [models.NAME] header; parsing must find the same names."""
    from archspec.io.catalog import _index, load_family_file

    parsed = [p.name for p in load_family_file(path)]
    assert parsed == [n for n, f in _index().items() if f == path]


def test_bert_follows_devlin_2018():
    s = archspec.preset("bert-large")
    assert (s.kind, s.encoder_layers, s.d_model, s.n_heads, s.d_ff) == ("encoder-only", 24, 1024, 16, 4096)
    assert (s.vocab_size, s.max_positions, s.type_vocab_size) == (30522, 512, 2)
    assert (s.norm_position, s.embedding_norm, s.pooler, s.final_norm) == ("post", True, True, False)


# ---------------------------------------------------------------- presets typed from released config.json files

HF_DATA = Path(__file__).resolve().parent / "data" / "hf"
# preset -> the released config.json (tests/data/hf/, sources in SOURCES.md) it is typed from
TYPED_FROM_A_RELEASED_CONFIG = {
    "qwen3-0.6b": "qwen3-0.6b", "qwen3-8b": "qwen3-8b", "qwen3-32b": "qwen3-32b", "qwen3-30b-a3b": "qwen3-30b-a3b",
    "qwen3-235b-a22b": "qwen3-235b-a22b", "qwen3-next-80b-a3b": "qwen3-next-80b-a3b-thinking",
    "llama-3.2-1b": "llama-3.2-1b", "llama-3.2-3b": "llama-3.2-3b", "llama-4-scout": "llama-4-scout-17b-16e-instruct",
    "llama-4-maverick": "llama-4-maverick-17b-128e-instruct", "gpt-oss-20b": "gpt-oss-20b",
    "gpt-oss-120b": "gpt-oss-120b",
    "deepseek-v3": "deepseek-v3", "deepseek-v3.2": "deepseek-v3.2", "glm-4.5-air": "glm-4.5-air", "phi-4": "phi-4",
    "kimi-k2": "kimi-k2-instruct", "minimax-m2": "minimax-m2.5", "nemotron-h-56b": "nemotron-h-56b-base-8k",
    "olmo-2-13b": "olmo-2-1124-13b", "gemma-2-27b": "gemma-2-27b",
    "llama-2-7b": "llama-2-7b", "llama-2-13b": "llama-2-13b", "llama-2-70b": "llama-2-70b", "llama-3-8b": "llama-3-8b",
    "llama-3-70b": "llama-3-70b", "llama-3.1-8b": "llama-3.1-8b", "llama-3.1-70b": "llama-3.1-70b",
    "llama-3.1-405b": "llama-3.1-405b-instruct-kv8", "llama-3.3-70b": "llama-3.3-70b-instruct", "qwen3-4b": "qwen3-4b",
    "mistral-7b-v0.3": "mistral-7b-instruct-v0.3", "mistral-large-2": "mistral-large-instruct-2407",
    "qwen2.5-7b": "qwen2.5-7b", "qwen2.5-72b": "qwen2.5-72b", "qwen3-1.7b": "qwen3-1.7b", "qwen3-14b": "qwen3-14b",
    "mistral-7b": "mistral-7b-v0.1", "mistral-nemo-12b": "mistral-nemo-instruct-2407",
    "mixtral-8x7b": "mixtral-8x7b-instruct", "mixtral-8x22b": "mixtral-8x22b-instruct",
    "gemma-2-2b": "gemma-2-2b", "gemma-2-9b": "gemma-2-9b", "gemma-3-1b": "gemma-3-1b-it",
    "gemma-3-27b": "gemma-3-27b-it",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TYPED_FROM_A_RELEASED_CONFIG))
def test_preset_equals_what_the_importer_reads_from_its_released_config(name):
    """The preset (typed by hand, with provenance comments) and archspec's reading of the same released file
    are two derivations of one model: the same spec field by field, the same counts component by component."""
    from archspec.count.params import count_params

    config = HF_DATA / f"{TYPED_FROM_A_RELEASED_CONFIG[name]}.json"
    preset, released = archspec.preset(name), archspec.load_spec(str(config))
    assert preset.model_dump(exclude={"name"}) == released.model_dump(exclude={"name"})
    for mtp in (False, True) if preset.mtp is not None else (False,):  # mtp=True asks for modules it has
        ours, theirs = count_params(preset, mtp=mtp), count_params(released, mtp=mtp)
        assert (ours.total, ours.active, ours.components) == (theirs.total, theirs.active, theirs.components)


def test_params_of_a_preset_and_of_its_released_config_agree_on_the_command_line(run_json):
    """`archspec params PRESET CONFIG.json`: one call, two objects with the same exact counts."""
    preset, config = run_json("params", "minimax-m2", str(HF_DATA / "minimax-m2.5.json"), "--mtp")
    assert preset["name"] == "minimax-m2" and config["name"] == "minimax-m2.5"
    assert {k: v for k, v in preset.items() if k != "name"} == {k: v for k, v in config.items() if k != "name"}


# ---------------------------------------------------------------- presets typed from a released file's keys

_GEMMA3 = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3", "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False},
}  # fmt: skip
# preset -> (the released config.json's keys as public copies print them, no copy of the file itself found; the
# parameters the hub stores for that checkpoint, llmfit 1.1.17's record of the hub repository). The family files
# name the copies; the stored total pins every shape the keys give, the towers' included.
TYPED_FROM_CONFIG_KEYS = {
    "gemma-3-4b": ({**_GEMMA3, "text_config": {
        "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}}, 4_300_079_472),
    "gemma-3-12b": ({**_GEMMA3, "text_config": {
        "hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text", "num_attention_heads": 16,
        "num_hidden_layers": 48, "num_key_value_heads": 8, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024}}, 12_187_325_040),
    "mistral-small-3.1-24b": ({
        "architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10, "model_type": "mistral3",
        "multimodal_projector_bias": False, "projector_hidden_act": "gelu", "spatial_merge_size": 2,
        "text_config": {
            "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
            "initializer_range": 0.02, "intermediate_size": 32768, "max_position_embeddings": 131072,
            "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0, "sliding_window": None, "use_cache": True,
            "vocab_size": 131072},
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
        "vision_config": {
            "attention_dropout": 0.0, "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024, "image_size": 1540,
            "initializer_range": 0.02, "intermediate_size": 4096, "model_type": "pixtral", "num_attention_heads": 16,
            "num_channels": 3, "num_hidden_layers": 24, "patch_size": 14, "rope_theta": 10000.0},
        "vision_feature_layer": -1}, 24_011_361_280),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TYPED_FROM_CONFIG_KEYS))
def test_preset_is_the_text_model_of_its_config_keys_whose_whole_model_holds_the_hub_total(name):
    """transformers builds the checkpoint's model from the keys on the meta device: its text model (the causal LM of
    the text config, with the output head the text config gives it) has the preset's count, and the text model with
    the towers the keys describe has the total the hub stores."""
    import copy

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from archspec.count.params import count_params

    raw, stored = TYPED_FROM_CONFIG_KEYS[name]
    config = transformers.CONFIG_MAPPING[raw["model_type"]].from_dict(copy.deepcopy(raw))
    text_config = config.get_text_config()
    with torch.device("meta"):
        whole = getattr(transformers, raw["architectures"][0])(config)
        text = transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(text_config)](text_config)
    text_total = sum(p.numel() for p in text.parameters())
    towers = sum(p.numel() for n, p in whole.named_parameters() if "language_model" not in n and "lm_head" not in n)
    assert count_params(archspec.preset(name)).total == text_total
    assert text_total + towers == stored


# ---------------------------------------------------------------- presets typed from published figures

# preset -> transformers' config of the same model, typed here from the figures its family file gives (no
# released config.json was found): the paper's layout, the family's released file for the rest, and what
# the family file says no source states (Jamba-1.5-Large's expert width, fitted to the hub's stored total;
# its dt rank by transformers' "auto", d_model / 16, as Jamba-v0.1's file has it)
TYPED_FROM_PUBLISHED_FIGURES = {
    "jamba-1.5-large": {
        "model_type": "jamba", "architectures": ["JambaForCausalLM"], "vocab_size": 65536, "hidden_size": 8192,
        "num_hidden_layers": 72, "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 24576,
        "num_experts": 16, "num_experts_per_tok": 2, "expert_layer_period": 2, "expert_layer_offset": 1,
        "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
        "mamba_dt_rank": "auto", "mamba_conv_bias": True, "mamba_proj_bias": False, "tie_word_embeddings": False,
        "max_position_embeddings": 262144, "rms_norm_eps": 1e-6,
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TYPED_FROM_PUBLISHED_FIGURES))
def test_preset_equals_transformers_model_of_its_published_figures(name):
    """transformers builds the model from the figures the preset gives, on the meta device: the same total,
    and the same active count where the routed experts a token skips are the model's expert tensors."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from archspec.count.params import count_params

    raw = TYPED_FROM_PUBLISHED_FIGURES[name]
    config = transformers.CONFIG_MAPPING[raw["model_type"]].from_dict(dict(raw))
    with torch.device("meta"):
        model = getattr(transformers, raw["architectures"][0])(config)
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    skipped = experts * (raw["num_experts"] - raw["num_experts_per_tok"]) // raw["num_experts"]
    count = count_params(archspec.preset(name))
    assert (count.total, count.active) == (total, total - skipped)
