"""ModelSpec: defaults, validation, replace, and spec files."""

import json

import pytest
from pydantic import ValidationError

from archspec import ModelSpec, SpecError, load_spec
from archspec.describe.blocks import AttentionShape

BASE = dict(name="toy", vocab_size=100, d_model=64, decoder_layers=2, n_heads=4, max_positions=32)


def test_derived_defaults_follow_the_table():
    s = ModelSpec(**BASE)
    assert (s.d_head, s.d_value, s.n_kv_heads, s.d_ff) == (16, 16, 4, 256)
    assert s.final_norm is True and s.kind == "decoder-only"
    assert ModelSpec(**BASE, norm_position="post").final_norm is False


def test_given_fields_are_never_rewritten():
    s = ModelSpec(**{**BASE, "d_head": 10, "d_ff": 100})
    assert (s.d_head, s.d_value, s.d_ff) == (10, 10, 100)


def test_replace_rederives_defaults_and_revalidates():
    s = ModelSpec(**BASE)
    wider = s.replace(d_model=128)
    assert (wider.d_head, wider.d_ff) == (32, 512)
    assert s.d_model == 64  # the original is untouched
    with pytest.raises(SpecError, match="not divisible by n_heads"):  # the README's promise
        s.replace(d_model=66)


def test_spec_is_frozen():
    with pytest.raises(ValidationError):
        ModelSpec(**BASE).d_model = 3


def test_kind_is_derived_from_the_stacks():
    assert ModelSpec(**{**BASE, "decoder_layers": 0, "encoder_layers": 2}).kind == "encoder-only"
    assert ModelSpec(**{**BASE, "encoder_layers": 2}).kind == "encoder-decoder"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"d_model": 66}, "d_model=66 is not divisible by n_heads=4"),
        ({"n_kv_heads": 3}, "n_heads=4 is not divisible by n_kv_heads=3"),
        ({"position": "sinusoidal", "d_model": 63, "d_head": 16}, "even d_model"),
        ({"position": "rotary", "d_head": 15}, "even d_head"),
        ({"decoder_layers": 0}, "at least one"),
        ({"d_model": 0}, "greater than or equal to 1"),
        ({"vocab_size": -5}, "greater than or equal to 1"),
        ({"encoder_layers": -1}, "greater than or equal to 0"),
        ({"norm": "batchnorm"}, "'layernorm' or 'rmsnorm'"),
        ({"d_model": "64"}, "valid integer"),
        ({"bias": "yes"}, "valid boolean"),
        ({"colour": "red"}, "Extra inputs are not permitted"),
        ({"name": "GPT2"}, "should match pattern"),
        ({"pooler": True}, "pooler=true needs an encoder"),
    ],
)
def test_invalid_specs_are_rejected_with_the_field_named(changes, message):
    with pytest.raises(ValidationError, match=message):
        ModelSpec(**{**BASE, **changes})


def test_explicit_d_head_allows_non_divisible_width():
    s = ModelSpec(**{**BASE, "d_model": 70, "d_head": 16})
    assert AttentionShape.of(s).q == 64 and s.d_model == 70


@pytest.mark.parametrize("suffix", [".toml", ".json", ".yaml"])
def test_spec_files_round_trip(tmp_path, suffix):
    data = {**BASE, "activation": "swiglu", "n_kv_heads": 2}
    path = tmp_path / f"m{suffix}"
    if suffix == ".toml":
        path.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in data.items()))
    elif suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        yaml = pytest.importorskip("yaml")
        path.write_text(yaml.safe_dump(data))
    assert load_spec(path) == ModelSpec(**data)


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("empty.toml", "", "file is empty"),
        ("list.json", "[1, 2]", "top level must be a table"),
        ("bad.toml", "d_model = [", "malformed TOML"),
        ("bad.json", "{", "malformed JSON"),
        ("bad.yaml", "a: [1,", "malformed YAML"),
        ("scalar.yaml", "42", "top level must be a table"),
        ("spec.txt", "x", "unsupported file type"),
    ],
)
def test_malformed_files_raise_one_clear_error(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_spec(path)


def test_missing_file():
    with pytest.raises(SpecError, match="no such file"):
        load_spec("does-not-exist.toml")


def test_schema_lists_every_field_with_enums():
    schema = ModelSpec.model_json_schema()
    assert list(schema["properties"]) == list(ModelSpec.model_fields)
    assert schema["properties"]["activation"]["enum"] == [
        "relu",
        "gelu",
        "silu",
        "swiglu",
        "geglu",
        "relu2",
        "clamped_swiglu",
    ]
    assert schema["additionalProperties"] is False


def test_presets_function_survives_importing_the_data_package():
    import archspec.presets  # noqa: F401  (the data package)

    assert callable(archspec.presets) and "gpt2" in archspec.presets()


# ---------------------------------------------------------------- one description per figure set


def test_compare_describes_its_spec_once_and_describe_is_fresh_outside(monkeypatch):
    """compare() asks parameters, FLOPs, weights and the KV cache of one spec: inside its `describing`
    block the parts are described once and reused; outside a block every describe() is computed anew
    (a change to how parts are made is seen at once), and the figures equal those of separate calls."""
    import archspec
    import archspec.describe.blocks as blocks
    from archspec.count.flops import count_flops
    from archspec.memory import kv_cache_bytes_per_token, weights_bytes
    from archspec.plan.compare import compare

    calls = []  # the specs described (archspec.core.compiled, recording a program, describes a copy of its own)
    real = blocks._describe
    monkeypatch.setattr(blocks, "_describe", lambda spec, mtp: calls.append(spec) or real(spec, mtp))
    spec = archspec.preset("gpt2")
    row = compare(spec, 512)
    assert sum(c is spec for c in calls) == 1
    assert row.count == archspec.count_params(spec)
    before = sum(c is spec for c in calls)
    blocks.describe(spec)
    assert sum(c is spec for c in calls) == before + 1  # outside the block, described afresh
    f = count_flops(spec, 1, 512)
    assert (row.forward_per_token, row.weights_bytes, row.kv_cache_bytes_per_token) == (
        f.forward_per_token,
        weights_bytes(spec, "bf16"),
        kv_cache_bytes_per_token(spec, "bf16", 512),
    )
    with blocks.describing(spec):
        first, again = blocks.describe(spec), blocks.describe(spec)
        other = blocks.describe(archspec.preset("gpt2-medium"))  # another spec is not held
        assert first == again and first is not again  # a fresh list each time: a caller may extend it
    assert blocks.describe(spec) == first and not blocks._held
    assert other != first


def test_describing_blocks_may_interleave_and_close_in_any_order(monkeypatch):
    """Two generators that each hold a block open across a yield, closed in the order they were opened:
    each block reuses its own spec's parts while open (per mtp), and nothing is held once both close."""
    import archspec
    import archspec.describe.blocks as blocks

    calls = []
    real = blocks._describe
    monkeypatch.setattr(blocks, "_describe", lambda spec, mtp: calls.append((spec.name, mtp)) or real(spec, mtp))

    def figures(spec):
        with blocks.describing(spec):
            yield blocks.describe(spec)
            yield blocks.describe(spec), blocks.describe(spec, mtp=True), blocks.describe(spec, mtp=True)

    a, b = figures(archspec.preset("gpt2")), figures(archspec.preset("deepseek-v3"))
    next(a), next(b)
    next(a), next(b)  # a's block is still open while b's runs, and the other way round
    a.close()
    assert [name for name, _ in calls].count("gpt2") == 2 and len(calls) == 4  # once per spec and mtp
    b.close()
    assert not blocks._held
    blocks.describe(archspec.preset("gpt2"))
    assert len(calls) == 5  # outside every block: described anew


# ---------------------------------------------------------------- the token mixer's name: mixer, and attention

MIXED = (
    'name = "mixed"\nvocab_size = 64\nd_model = 32\ndecoder_layers = 4\nn_heads = 4\nmax_positions = 64\n'
    'position = "none"\nnorm = "rmsnorm"\n{top}\n'
    '[kinds.ssm]\n{kind} = {{ kind = "mamba2", heads = 2, head_dim = 16 }}\n'
    '[kinds.local]\n{kind} = {{ sliding_window = 8 }}\n[layers]\npattern = ["ssm", "local"]\n'
)


@pytest.mark.parametrize("top", ['[{}]\nqk_norm = "head"', '{} = {{ qk_norm = "head" }}'])
def test_attention_is_read_as_mixer_in_files_and_kinds(tmp_path, top):
    """A file written before the mixer had its name (`attention`, at the top and in a kind) loads to the
    spec of the same file that says `mixer`: the file format is a contract."""
    specs = {}
    for name in ("attention", "mixer"):
        path = tmp_path / f"{name}.toml"
        path.write_text(MIXED.format(top=top.format(name), kind=name))
        specs[name] = load_spec(path)
    older, newer = specs["attention"], specs["mixer"]
    assert older == newer and older.mixer.qk_norm == "head" and older.kinds["ssm"].mixer == newer.kinds["ssm"].mixer
    assert older.kind_spec("ssm").mixer.kind == "mamba2" and older.kind_spec("local").mixer.sliding_window == 8
    assert "attention" not in older.model_fields_set and "attention" not in older.model_dump()


def test_attention_is_mixer_for_python_callers():
    """`spec.attention` reads the mixer; `replace` and the constructor take either name, dotted or not."""
    base = dict(name="toy", vocab_size=64, d_model=32, decoder_layers=2, n_heads=4, max_positions=64)
    older = ModelSpec(**base, attention={"sliding_window": 8})
    assert older == ModelSpec(**base, mixer={"sliding_window": 8}) and older.attention is older.mixer
    assert older.replace(**{"attention.sliding_window": 16}) == older.replace(**{"mixer.sliding_window": 16})
    assert older.replace(**{"attention.sliding_window": 16}).mixer.sliding_window == 16
    mamba = {"kind": "mamba", "d_inner": 64, "dt_rank": 2}
    assert older.replace(attention=mamba).mixer.kind == "mamba" == older.replace(mixer=mamba).attention.kind


BOTH = "mixer and attention name the same table (attention is its older name); give one of them"


def test_mixer_and_attention_at_once_is_one_error(tmp_path, run_cli):
    base = dict(name="toy", vocab_size=64, d_model=32, decoder_layers=2, n_heads=4, max_positions=64)
    with pytest.raises(ValidationError, match="give one of them"):
        ModelSpec(**base, attention={}, mixer={})
    with pytest.raises(SpecError, match="give one of them"):
        ModelSpec(**base).replace(**{"attention.sliding_window": 8, "mixer.sliding_window": 8})
    path = tmp_path / "both.toml"
    path.write_text(MIXED.format(top='[attention]\nqk_norm = "head"\n[mixer]\nqk_norm = "head"', kind="mixer"))
    code, out, err = run_cli("params", str(path))
    assert code == 2 and out == "" and err == f"archspec: error: {path}: {BOTH}\n"
    path.write_text(MIXED.format(top="", kind="mixer").replace("[kinds.local]\n", "[kinds.local]\nattention = {}\n"))
    code, _, err = run_cli("params", str(path))
    assert code == 2 and err == f"archspec: error: {path}: kinds.local: {BOTH}\n"
    code, _, err = run_cli("params", "gpt2", "--set", "attention.qk_norm=head", "--set", "mixer.qk_norm=head")
    assert code == 2 and err == f"archspec: error: gpt2 with --set: {BOTH}\n"


def test_a_bad_field_is_named_as_the_file_names_the_mixer(tmp_path, run_cli):
    for name in ("attention", "mixer"):
        path = tmp_path / f"{name}.toml"
        path.write_text(MIXED.format(top=f"[{name}]\nsliding_window = 0", kind=name))
        code, _, err = run_cli("params", str(path))
        assert code == 2 and f": {name}.sliding_window: " in err and err.count("\n") == 1, err


def test_set_reads_either_name(run_json):
    older = run_json("params", "gpt2", "--set", "attention.qk_norm=head")
    assert older == run_json("params", "gpt2", "--set", "mixer.qk_norm=head") != run_json("params", "gpt2")


def test_presets_defaults_and_a_model_may_name_the_mixer_differently(tmp_path, run_json):
    """A presets file's [defaults] saying `attention` and a model saying `mixer`: the model's table wins,
    as it would under one name."""
    head = '[defaults]\nvocab_size = 64\nd_model = 32\ndecoder_layers = 2\nn_heads = 4\nmax_positions = 64\n'
    older = head + '[defaults.attention]\nqk_norm = "head"\n[models.toy]\nsummary = "toy"\nsource = "here"\n'
    (tmp_path / "a.toml").write_text(older + '[models.toy.mixer]\nsliding_window = 8\n')
    (tmp_path / "b.toml").write_text(older.replace("defaults.attention", "defaults.mixer")
                                     + '[models.toy.mixer]\nsliding_window = 8\n')  # fmt: skip
    from archspec.io.catalog import load_family_file

    (a,) = load_family_file(tmp_path / "a.toml")
    (b,) = load_family_file(tmp_path / "b.toml")
    assert a.spec == b.spec and a.spec.mixer.sliding_window == 8 and a.spec.mixer.qk_norm is False
