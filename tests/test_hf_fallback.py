"""A config.json whose model_type has no adapter: params, compare and flops count it by building
transformers' model on the meta device (archspec.reference.hf_fallback), labelled measured in every
format; other commands refuse it (no spec); without transformers the refusal names the nearest
supported types and the install extra.

No released config of a type without an adapter is in tests/data/hf/ yet: the codegen config here is
a toy (CodeGen's keys, toy sizes), and its counts are checked against hand formulas of CodeGen's
modules (transformers/models/codegen/modeling_codegen.py); the mixtral check removes mixtral's
adapter for the test and compares the measured counts with archspec's analytic ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import archspec
from archspec import hf
from archspec.count.params import count_params

pytest.importorskip("torch")
pytest.importorskip("transformers")

DATA = Path(__file__).parent / "data" / "hf"
V, D, L, T = 100, 64, 2, 16
CODEGEN = {"model_type": "codegen", "architectures": ["CodeGenForCausalLM"], "vocab_size": V, "n_embd": D,
           "n_layer": L, "n_head": 4, "n_positions": 32, "rotary_dim": 8}  # fmt: skip


def _write(tmp_path, obj, name="codegen.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return str(path)


def codegen_params() -> dict[str, int]:
    """CodeGen's modules by hand: a fused qkv_proj and out_proj without biases, fc_in/fc_out (4d) with
    biases, one LayerNorm per block (parallel attention and MLP), ln_f, an untied lm_head with bias."""
    return {"wte": V * D, "h.*.ln_1": L * 2 * D, "h.*.attn": L * (3 * D * D + D * D),
            "h.*.mlp": L * (D * 4 * D + 4 * D + 4 * D * D + D), "ln_f": 2 * D, "lm_head": V * D + V}  # fmt: skip


def codegen_flops(t: int) -> int:
    """2 per multiply-accumulate: qkv, out, fc_in, fc_out per token and layer; Q.K^T and scores.V over the
    full t x t matrix; the head."""
    return L * (2 * t * (3 * D * D + D * D + 8 * D * D) + 2 * 2 * t * t * D) + 2 * t * D * V


def test_params_of_a_type_without_adapter_are_measured_by_module(tmp_path, run_json):
    [obj] = run_json("params", _write(tmp_path, CODEGEN))
    assert obj["components"] == codegen_params()
    assert obj["total"] == sum(codegen_params().values()) == 112_228
    assert obj["active"] == obj["total"]  # no experts: dense
    assert obj["non_embedding"] == obj["total"] - V * D  # wte is the only nn.Embedding
    assert obj["source"].startswith("measured: transformers ") and "meta device" in obj["source"]


def test_flops_of_a_type_without_adapter_are_flop_counter_mode_at_the_commands_shape(tmp_path, run_json):
    [obj] = run_json("flops", _write(tmp_path, CODEGEN), "--seq-len", str(T), "--batch", "2")
    assert obj["forward"] == 2 * codegen_flops(T) == 6_963_200
    assert obj["forward_per_token"] == codegen_flops(T) // T and obj["training"] == 3 * obj["forward"]
    assert (obj["batch"], obj["seq_len"]) == (2, T) and obj["source"].startswith("measured: transformers ")


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
@pytest.mark.parametrize("command", ["params", "compare", "flops"])
def test_every_format_says_measured_not_analytic(command, fmt, tmp_path, run_cli):
    extra = [] if command == "params" else ["--seq-len", "16"]
    code, out, err = run_cli(command, _write(tmp_path, CODEGEN), "gpt2", "--format", fmt, *extra)
    assert code == 0, err
    assert "measured: transformers" in out and "built on the meta device" in out
    if fmt in ("table", "markdown"):
        assert "not analytic" in out
    assert "gpt2" in out  # an analytic model beside it keeps its own rendering


def test_active_parameters_of_measured_experts_equal_the_analytic_count(tmp_path, run_json, monkeypatch):
    """Mixtral's adapter removed: the measured total, and active by the routing rule (modules named
    experts, num_experts_per_tok of num_local_experts), equal archspec's analytic counts of the same file."""
    raw = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "vocab_size": 100, "hidden_size": 64,
           "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 32, "num_local_experts": 4, "num_experts_per_tok": 2}  # fmt: skip
    path = _write(tmp_path, raw, "mixtral.json")
    analytic = count_params(archspec.load_spec(path))
    monkeypatch.delitem(hf.FAMILIES, "mixtral")
    [obj] = run_json("params", path)
    assert obj["source"].startswith("measured:")
    assert (obj["total"], obj["active"]) == (analytic.total, analytic.active)
    assert obj["active"] < obj["total"] and "active_rule" in obj


@pytest.mark.parametrize("command", ["memory", "show", "import", "verify", "sweep"])
def test_commands_that_need_a_spec_refuse_a_type_without_adapter(command, tmp_path, run_cli):
    path = _write(tmp_path, CODEGEN)
    args = [command, path] + (["--vary", "d_model=64,128"] if command == "sweep" else [])
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "model_type 'codegen' has no adapter, so there is no spec" in err and "params" in err


def test_set_is_refused_for_a_measured_model(tmp_path, run_cli):
    code, _, err = run_cli("params", _write(tmp_path, CODEGEN), "--set", "d_model=128")
    assert code == 2 and err.count("\n") == 1 and "--set changes spec fields" in err


def test_without_transformers_the_refusal_names_the_nearest_types_and_the_extra(tmp_path, run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    code, out, err = run_cli("params", _write(tmp_path, {**CODEGEN, "model_type": "starcoder"}))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "nearest supported: starcoder2" in err and "pip install 'archspec-transformers[hf]'" in err
    assert "transformers" in err


@pytest.mark.parametrize(
    "change, message",
    [
        ({"architectures": ["NoSuchForCausalLM"]}, "has no class 'NoSuchForCausalLM'"),
        ({"model_type": "no_such_type"}, "does not know model_type 'no_such_type'"),
        ({"n_head": 5}, "cannot build CodeGenForCausalLM from this config"),
        ({"architectures": []}, "names no class in architectures"),
    ],
    ids=["unknown-class", "unknown-type", "build-fails", "no-class"],
)
def test_a_config_transformers_cannot_build_is_one_line(change, message, tmp_path, run_cli):
    code, out, err = run_cli("params", _write(tmp_path, {**CODEGEN, **change}))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert message in err and "has no adapter" in err


def test_the_analytic_path_still_imports_no_torch(tmp_path):
    import subprocess

    code = (
        "import sys, archspec; "
        f"archspec.load_spec({str(DATA / 'gpt2.json')!r}); "
        "assert not {'torch', 'transformers'} & set(sys.modules), 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
