"""The output head of a multimodal wrapper's config.json, tied or not as the checkpoint that came with the file
stores it.

transformers 5 ties the head on a wrapper (Gemma 3's, Qwen3.5's, Mistral 3's) by the wrapper config's own
tie_word_embeddings, default the wrapper class's; transformers 4 tied it by the text config's
(`get_text_config(decoder=True)`), default the text config class's, and saved `lm_head.weight` beside the
token embedding where that said false. Mistral Small 3.1's file (written by 4.50) names neither: transformers 5
builds it tied (Mistral3Config's default), its checkpoint stores the head untied (MistralConfig's default), and
transformers 5 loads that checkpoint untied (both tensors present with different values: it does not tie).
archspec counts the checkpoint. Llama 4's head sits inside its text model and follows the text config in both.
"""

from __future__ import annotations

import itertools
import json

import pytest
from released import DATA

import archspec
from archspec import hf
from archspec.count.params import count_params

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

# mistralai/Mistral-Small-3.1-24B-Instruct-2503 config.json, typed from the copy in NVIDIA/TensorRT-LLM
# tests/unittest/_torch/modeling/test_modeling_mistral.py @ 0373e5a1 (fixture mistral_small_3_1_24b_config), with
# num_hidden_layers 40 as released (the copy sets 4: "Reduce this from the original 40"). No tie_word_embeddings.
MISTRAL_SMALL_3_1 = {
    "architectures": ["Mistral3ForConditionalGeneration"],
    "image_token_index": 10,
    "model_type": "mistral3",
    "multimodal_projector_bias": False,
    "projector_hidden_act": "gelu",
    "spatial_merge_size": 2,
    "text_config": {
        "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
        "initializer_range": 0.02, "intermediate_size": 32768, "max_position_embeddings": 131072,
        "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0, "sliding_window": None, "use_cache": True,
        "vocab_size": 131072,
    },
    "torch_dtype": "bfloat16",
    "transformers_version": "4.50.0.dev0",
    "vision_config": {
        "attention_dropout": 0.0, "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024, "image_size": 1540,
        "initializer_range": 0.02, "intermediate_size": 4096, "model_type": "pixtral", "num_attention_heads": 16,
        "num_channels": 3, "num_hidden_layers": 24, "patch_size": 14, "rope_theta": 10000.0,
    },
    "vision_feature_layer": -1,
}  # fmt: skip
# the parameters the released checkpoint stores, vision tower and projector included (llmfit 1.1.17's record of
# the hub repository, as presets/mistral.toml cites it)
STORED_TOTAL = 24_011_361_280


def _imported(raw: dict) -> hf.Imported:
    return hf.from_mapping(raw, "wrapped")


def _count(raw: dict) -> int:
    return count_params(archspec.ModelSpec.model_validate(_imported(raw).data)).total


def test_mistral_small_3_1_counts_the_head_its_checkpoint_stores():
    """archspec: untied, the preset field by field. transformers 5's Mistral3ForConditionalGeneration of the same file
    ties the head; its MistralForCausalLM of the text config (what transformers 4 tied by, and what vLLM
    builds the language model from) does not, and counts what archspec counts; with transformers' vision tower
    and projector that is the checkpoint's stored total, which the tied model misses by the head."""
    raw = MISTRAL_SMALL_3_1
    ours = _count(raw)
    preset = archspec.preset("mistral-small-3.1-24b")
    assert archspec.ModelSpec.model_validate({**_imported(raw).data, "name": preset.name}) == preset  # untied too
    assert ours == count_params(preset).total == 23_572_403_200
    config = transformers.Mistral3Config.from_dict(raw)
    assert config.tie_word_embeddings is True and config.get_text_config().tie_word_embeddings is False
    with torch.device("meta"):
        text_model = transformers.MistralForCausalLM(config.get_text_config())
    assert text_model.lm_head.weight is not text_model.model.embed_tokens.weight
    assert sum(p.numel() for p in text_model.parameters()) == ours
    head = text_model.lm_head.weight.numel()

    shallow = json.loads(json.dumps(raw))  # the towers at full size, one text layer: the wrapper builds quickly
    shallow["text_config"]["num_hidden_layers"] = 1
    with torch.device("meta"):
        wrapper = transformers.Mistral3ForConditionalGeneration(transformers.Mistral3Config.from_dict(shallow))
    assert wrapper.lm_head.weight is wrapper.model.language_model.embed_tokens.weight  # transformers 5: tied
    text_names = ("model.language_model.", "lm_head")
    towers = sum(p.numel() for n, p in wrapper.named_parameters() if not n.startswith(text_names))
    assert ours + towers == STORED_TOTAL
    assert ours - head + towers == STORED_TOTAL - head  # what the tied model would count

    notes = " ".join(_imported(raw).notes)
    assert "transformers 4.50.0.dev0" in notes and "untied" in notes
    assert "transformers 5 builds Mistral3ForConditionalGeneration with its head tied" in notes
    tied = archspec.ModelSpec.model_validate(_imported(raw).data).replace(tie_embeddings=True)
    assert count_params(tied).total == ours - head


# a Mistral 3 at toy width, as transformers 4.50 wrote the released file: no tie_word_embeddings anywhere
TOY = {
    "architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
    "text_config": {"model_type": "mistral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
                    "max_position_embeddings": 256, "sliding_window": None},
    "vision_config": {"model_type": "pixtral", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1,
                      "num_attention_heads": 2, "head_dim": 16, "image_size": 28, "patch_size": 14},
    "transformers_version": "4.50.0.dev0",
}  # fmt: skip
# transformers 5's names -> the released checkpoint's (transformers 4.50's), as vLLM's Mistral3 weight mapper and
# TensorRT-LLM's test convert them
RELEASED_NAMES = {
    "model.language_model.": "language_model.model.",
    "model.vision_tower.": "vision_tower.",
    "model.multi_modal_projector.": "multi_modal_projector.",
    "lm_head.": "language_model.lm_head.",
}


def _released_name(name: str) -> str:
    prefix = next(p for p in RELEASED_NAMES if name.startswith(p))
    return RELEASED_NAMES[prefix] + name[len(prefix) :]


def _untied_checkpoint(folder, raw: dict):
    """A toy Mistral 3 checkpoint with a head of its own (random values, unlike the token table's), under the
    released names, beside the config.json `raw`; transformers 5's model of it loaded from the folder, and
    its text model's and head's parameter count."""
    config = transformers.Mistral3Config.from_dict({**TOY, "tie_word_embeddings": False})
    torch.manual_seed(0)
    written = transformers.Mistral3ForConditionalGeneration(config)
    tensors = {_released_name(k): v.contiguous() for k, v in written.state_dict().items()}
    assert "language_model.lm_head.weight" in tensors and "language_model.model.embed_tokens.weight" in tensors
    safetensors_torch.save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(raw))
    loaded = transformers.Mistral3ForConditionalGeneration.from_pretrained(folder)
    assert loaded.lm_head.weight is not loaded.model.language_model.embed_tokens.weight  # both stored, unequal
    assert torch.equal(loaded.lm_head.weight, tensors["language_model.lm_head.weight"])
    text = sum(p.numel() for n, p in loaded.named_parameters() if n.startswith(("model.language_model.", "lm_head")))
    return loaded, text


def test_a_mistral3_checkpoint_is_loaded_by_transformers_and_read_by_archspec_with_its_own_head(tmp_path, run_cli):
    """A toy checkpoint with the released tensor names and a head of its own beside a config without
    tie_word_embeddings: transformers 5 loads it with the head untied (the stored head), archspec reads the
    folder untied, and `check` finds every stored tensor the spec's or a named tower's."""
    loaded, text = _untied_checkpoint(tmp_path, TOY)
    spec = archspec.load_spec(tmp_path)
    assert spec.tie_embeddings is False and count_params(spec).total == text
    code, out, err = run_cli("check", str(tmp_path), "--format", "json")
    report = json.loads(out)[0]
    assert (report["missing"], report["misshapen"], report["extra"]) == ([], [], []), err
    assert set(report["hidden"]) == {"vision_tower", "multi_modal_projector"}
    assert report["by_component"]["head"]["params"] == loaded.lm_head.weight.numel()
    [counted] = json.loads(run_cli("params", str(tmp_path), "--format", "json")[1])
    assert not any("stores language_model.lm_head.weight" in n for n in counted["notes"])


def test_a_checkpoint_with_a_head_its_config_ties_says_so(tmp_path, run_cli):
    """A config that ties the head (transformers 5's file: the wrapper's key true) beside a checkpoint that
    stores a head of its own: transformers 5 loads the stored head apart; archspec, which reads no values,
    counts the config's tied head and says what the checkpoint holds and how to count it."""
    loaded, text = _untied_checkpoint(tmp_path, {**TOY, "transformers_version": "5.5.0", "tie_word_embeddings": True})
    code, out, err = run_cli("params", str(tmp_path), "--format", "json")
    [counted] = json.loads(out)
    assert counted["total"] == text - loaded.lm_head.weight.numel()
    assert any("stores language_model.lm_head.weight" in n and "tie_embeddings=false" in n for n in counted["notes"])
    [separate] = json.loads(run_cli("params", str(tmp_path), "--set", "tie_embeddings=false", "--format", "json")[1])
    assert separate["total"] == text and not any("lm_head.weight" in n for n in separate["notes"])


# every wrapper, every writer, every placement of tie_word_embeddings, in a released file's text_config
CASES = list(itertools.product(sorted(hf.WRAPPERS), ("4.50.0", "5.5.0"), (None, True, False), (None, True, False)))
RELEASED = {"gemma3": "gemma-3-27b-it", "gemma4": "gemma-4-31b-it-nvfp4", "llama4": "llama-4-scout-17b-16e-instruct",
            "qwen3_5": "qwen3.5-27b", "qwen3_5_moe": "qwen3.5-35b-a3b"}  # fmt: skip


def _text_config(model_type: str) -> dict:
    if model_type == "mistral3":
        raw = MISTRAL_SMALL_3_1
    else:
        raw = json.loads((DATA / f"{RELEASED[model_type]}.json").read_text())
    return {k: v for k, v in raw["text_config"].items() if k != "tie_word_embeddings"}


def test_the_tying_cases_cover_every_wrapper():
    assert set(RELEASED) | {"mistral3"} == set(hf.WRAPPERS)


@pytest.mark.parametrize(("model_type", "writer", "top", "text"), CASES)
def test_a_wrapper_head_is_tied_as_the_transformers_that_wrote_the_file_tied_it(model_type, writer, top, text):
    """transformers' own config objects of the same file say how each version ties: 5 by the wrapper config's
    tie_word_embeddings (`get_expanded_tied_weights_keys`), 4 by `get_text_config(decoder=True)`'s; a head inside
    the text model (Llama 4) by the text config's in both."""
    raw: dict = {"model_type": model_type, "transformers_version": writer, "text_config": _text_config(model_type)}
    if top is not None:
        raw["tie_word_embeddings"] = top
    if text is not None:
        raw["text_config"]["tie_word_embeddings"] = text
    config = transformers.CONFIG_MAPPING[model_type].from_dict(json.loads(json.dumps(raw)))
    wrapper = hf.WRAPPERS[model_type]
    if wrapper.head == "text" or writer.startswith("4."):
        expected = config.get_text_config(decoder=True).tie_word_embeddings
    else:
        expected = config.tie_word_embeddings
    imported = _imported(raw)
    assert imported.data["tie_embeddings"] is expected
    if wrapper.head == "text":
        noted = False
    elif writer.startswith("4."):  # archspec parts from transformers 5's model of the file, and says so
        noted = expected != config.tie_word_embeddings
    else:  # the text config says otherwise than the wrapper's key that archspec and transformers 5 follow
        noted = text is not None and text != expected
    assert any("transformers 5 builds" in n for n in imported.notes) is noted


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"model_type": "mistral", "tie_word_embeddings": "false"}, "mistral key tie_word_embeddings='false'"),
        ({"model_type": "mistral3", "tie_word_embeddings": 0}, "mistral3 key tie_word_embeddings=0"),
        ({"model_type": "mistral3", "text_config": {"tie_word_embeddings": "false"}},
         "mistral3 text_config key tie_word_embeddings='false'"),
        ({"model_type": "gemma3", "text_config": {"tie_word_embeddings": [True]}},
         "gemma3 text_config key tie_word_embeddings=[True]"),
    ],
)  # fmt: skip
def test_a_tying_flag_that_is_not_a_bool_is_refused_by_name(raw, named, tmp_path, run_cli):
    """transformers' configs refuse it (a strict bool field); read as Python's truth, the string "false"
    would tie the head."""
    with pytest.raises(Exception, match="tie_word_embeddings"):  # noqa: PT011 - transformers' own validation error
        transformers.CONFIG_MAPPING[raw["model_type"]].from_dict(json.loads(json.dumps(raw)))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    code, out, err = run_cli("params", str(path))
    assert (code, out) == (2, "") and err.count("\n") == 1 and named in err and "not true or false" in err
