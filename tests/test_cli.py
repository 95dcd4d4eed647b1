"""The command line: outputs, JSON shapes, and one clear line with exit 2 for bad input."""

import json
import subprocess
import sys

import pytest

import archspec


def test_compare_shows_the_card_side_by_side(run_cli):
    code, out, _ = run_cli("compare", "transformer-base", "gpt2")
    assert code == 0
    assert "6 enc + 6 dec" in out and "63.1M" in out and "124.4M" in out and "rounded" in out


def test_params_json_is_exact(run_json):
    (obj,) = run_json("params", "gpt3-175b")
    assert list(obj)[0] == "name" and obj["total"] == 174_604_259_328
    assert sum(obj["components"].values()) == obj["total"]
    assert {"non_embedding", "estimate", "components"} <= set(obj)


def test_compare_json_has_the_params_keys(run_json):
    objs = run_json("compare", "gpt2", "gpt2-medium")
    assert [o["name"] for o in objs] == ["gpt2", "gpt2-medium"]
    assert objs[1]["total"] == 354_823_168 and "components" in objs[1]


def test_set_overrides_a_field_with_underscores_and_scientific_notation(run_json):
    (obj,) = run_json("params", "gpt2", "--set", "vocab_size=50_304", "--set", "max_positions=2e3")
    assert obj["components"]["embed"] == 50304 * 768 and obj["components"]["position"] == 2000 * 768


def test_spec_file_as_model(run_json, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\nvocab_size = 1000\nd_model = 64\ndecoder_layers = 2\nn_heads = 4\nmax_positions = 16\n'
    )
    (obj,) = run_json("params", str(path))
    assert obj["name"] == "mine"


def test_show_resolves_defaults(run_json):
    (obj,) = run_json("show", "gpt2")
    assert obj["d_head"] == 64 and obj["d_ff"] == 3072 and obj["final_norm"] is True


def test_list_names_every_preset(run_json):
    assert [o["name"] for o in run_json("list")] == archspec.presets()


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_every_format_renders(run_cli, fmt):
    code, out, _ = run_cli("params", "gpt2", "--format", fmt)
    assert code == 0 and ("124.4M" in out or "124439808" in out)


def test_schema_is_json_schema(run_cli):
    code, out, _ = run_cli("schema")
    assert code == 0 and json.loads(out)["title"] == "ModelSpec"


def test_schema_names_the_mixer_and_its_older_name(run_cli):
    """The token mixer is `mixer`; `attention`, its older name that files still use, is in the schema as a
    deprecated property of the same table (in the spec and in a layer kind)."""
    code, out, _ = run_cli("schema")
    schema = json.loads(out)
    for props in (schema["properties"], schema["$defs"]["LayerKind"]["properties"]):
        assert not props["mixer"].get("deprecated") and props["attention"]["deprecated"] is True
        assert {k: v for k, v in props["attention"].items() if k not in ("deprecated", "description")} == {
            k: v for k, v in props["mixer"].items() if k != "description"
        }
    code, out, _ = run_cli("schema", "--format", "csv")
    rows = {line.split(",")[0]: line for line in out.splitlines()}
    assert "standard | latent | mamba | mamba2 | gated_deltanet | none" in rows["mixer"]
    assert "older name of mixer" in rows["attention"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["params", "gtp2"], "unknown preset 'gtp2'; did you mean 'gpt2'"),
        (["params", "gpt2", "--set", "d_modle=5"], "unknown field 'd_modle'; did you mean 'd_model'"),
        (["params", "gpt2", "--set", "d_model=abc"], "d_model: Input should be a valid integer"),
        (["params", "gpt2", "--set", "d_model=0"], "d_model: Input should be greater than or equal to 1"),
        (["params", "gpt2", "--set", "d_model=-8"], "greater than or equal to 1"),
        (["params", "gpt2", "--set", "n_heads=7"], "not divisible by n_heads=7"),
        (
            ["params", "gpt2", "--set", "position=rope"],
            "'learned', 'sinusoidal', 'rotary', 'alibi', 'relative', 'disentangled', 'transformer_xl', 'none'",
        ),
        (["params", "gpt2", "--set", "d_model"], "expected FIELD=VALUE"),
        (["params", "gpt2", "--format", "xml"], "invalid choice: 'xml'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["params", "missing.toml"], "no such file"),
        (["params"], "the following arguments are required: MODEL"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run_cli, argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("empty.toml", "", "file is empty"),
        ("list.json", "[1]", "top level must be a table"),
        ("bad.toml", "x = [", "malformed TOML"),
        ("bad.json", "{", "malformed JSON"),
        (
            "wrong.toml",
            'name = "x"\nvocab_size = 1\nd_model = 8\ndecoder_layers = 1\nn_heads = 3\nmax_positions = 4\n',
            "d_model=8 is not divisible by n_heads=3",
        ),
    ],
)
def test_bad_files_are_one_line_and_exit_2(run_cli, tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run_cli("params", str(path))
    assert code == 2 and message in err and err.count("\n") == 1


def test_every_command_has_help_with_an_example(run_cli):
    from archspec.cli import COMMANDS

    for name in COMMANDS:
        code, out, _ = run_cli(name, "--help")
        assert code == 0 and "examples:" in out and "--format" in out, name


def test_analytic_commands_never_import_torch():
    code = (
        "import sys; from archspec.cli import main; main(['compare','transformer-base','gpt2','gpt3-175b']); "
        "main(['params','gpt2']); main(['list']); assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_python_dash_m_works():
    proc = subprocess.run(
        [sys.executable, "-m", "archspec", "params", "gpt2", "--format", "json"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["total"] == 124_439_808


def test_verify_without_a_model_verifies_every_preset_in_order(run_cli, monkeypatch):
    """`archspec verify` alone hands every preset, unchanged and in the catalog's order, to the verifier
    (each preset's own verification is the test above)."""
    pytest.importorskip("torch")
    import archspec.cli.verify

    given = []

    def verify_all(reference, specs):
        given.extend(specs)
        raise archspec.SpecError("stop: the specs were handed over")

    monkeypatch.setattr(archspec.cli.verify, "_verify_all", verify_all)
    code, _, err = run_cli("verify")
    assert code == 2 and "stop: the specs were handed over" in err
    assert [s.name for s in given] == archspec.presets()
    assert all(s == archspec.preset(s.name) for s in given)


@pytest.mark.slow
def test_verify_of_many_models_across_processes_equals_one_by_one():
    """`archspec verify` of many models spreads them over worker processes (the presets' test reads the
    session's reports instead): the same reports, in the order given."""
    pytest.importorskip("torch")
    import archspec.reference as reference
    from archspec.cli.verify import _verify_all

    specs = [archspec.ModelSpec(name=f"toy-{i}", vocab_size=50 + i, d_model=16, decoder_layers=1 + i % 3, n_heads=2,
                                max_positions=8) for i in range(8)]  # fmt: skip
    assert _verify_all(reference, specs) == [reference.verify(s) for s in specs]


def test_verify_exits_1_and_names_the_tensor_and_component_on_a_mismatch(run_cli, monkeypatch):
    """A description that drifts from the builder (here: the MLP's down projection described without
    its bias) is caught tensor by tensor and component by component."""
    pytest.importorskip("torch")

    import archspec.describe.blocks as blocks

    real = blocks.mlp_part

    def down_without_bias(spec, stack, layer):
        part = real(spec, stack, layer)
        entries = tuple(e._replace(bias=False) if e.name == "down" else e for e in part.entries)
        return part._replace(entries=entries)

    monkeypatch.setattr(blocks, "mlp_part", down_without_bias)
    monkeypatch.setattr(blocks, "_BLOCKS", {})  # layer kinds described before the patch are not reused
    code, out, _ = run_cli("verify", "gpt2")
    assert code == 1 and "MISMATCH" in out
    assert "decoder.layers.0.mlp.down.bias (768,) is in the model, not in the description" in out
    assert "params mlp 56,659,968 vs 56,669,184" in out  # 12 layers x 768 biases fewer


def test_verify_without_torch_names_the_extra(run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    code, _, err = run_cli("verify", "gpt2")
    assert code == 2 and "archspec-transformers[reference]" in err and err.count("\n") == 1


def test_verify_rejects_a_bad_spec_file(run_cli, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"name": "x"}')
    code, _, err = run_cli("verify", str(path))
    assert code == 2 and "missing required field 'vocab_size'" in err


def test_the_command_line_is_one_module_per_command_each_small():
    """archspec/cli/: every command of COMMANDS has its module (HELP, EXAMPLES, run), and no module
    grows past ~700 lines (docs/architecture.md, "The command line")."""
    from pathlib import Path

    import archspec.cli
    from archspec.cli import COMMANDS, command_module

    for name in COMMANDS:
        module = command_module(name)
        assert module.HELP and module.EXAMPLES.startswith(f"archspec {name}") and callable(module.run), name
    folder = Path(archspec.cli.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert {f"{m}.py" for m in COMMANDS.values()} <= set(sizes)
    assert max(sizes.values()) <= 700, sizes
