"""Hostile and extreme input: every case ends in a right answer or one clear line, never a traceback.

The contract (docs/architecture.md): exit 0 with a right answer, exit 1 for a check that found a mismatch,
exit 2 with exactly one line on stderr that names the problem. From the API: SpecError (a
ValueError) or TypeError naming the argument. Right answers are checked against the API, which
computes them from the data without the command line's or the file reader's parsing; the limits
themselves are in archspec/core/limits.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import typing
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from matrix import fast_only

import archspec
from archspec import ModelSpec, SpecError, count_params
from archspec.cli import main
from archspec.core.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_INTEGER
from archspec.count.flops import PF_DAY, count_flops, training_cost
from archspec.io.loading import load_spec, parse_number
from archspec.memory import estimate_memory, kv_cache_bytes, weights_bytes
from archspec.plan.hardware import accelerator

GPT2 = archspec.preset("gpt2")
BERT = archspec.preset("bert-base")
T_BASE = archspec.preset("transformer-base")
GPT2_TOTAL = count_params(GPT2).total
SPEC = dict(name="mine", vocab_size=1000, d_model=64, decoder_layers=2, n_heads=4, max_positions=16)
SPEC_TOTAL = count_params(ModelSpec(**SPEC)).total
SPEC_TOML = 'name = "mine"\nvocab_size = 1000\nd_model = 64\ndecoder_layers = 2\nn_heads = 4\nmax_positions = 16\n'
SPEC_YAML = "name: mine\nvocab_size: 1000\nd_model: 64\ndecoder_layers: 2\nn_heads: 4\nmax_positions: 16\n"
DEEP = 100_000
FIELDS = list(ModelSpec.model_fields)


# ---------------------------------------------------------------- the contract, as helpers


def cli(*argv) -> tuple[int, str, str]:
    """Run the command line in this process: (exit code, stdout, stderr). Any exception other than
    SystemExit escapes and fails the test: that would be a traceback for the user."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def assert_one_line_error(code: int, out: str, err: str, message: str = "") -> None:
    assert code == 2, (code, out[:300], err[:300])
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("archspec: error: ") and err.endswith("\n") and err.count("\n") == 1, err[:500]
    assert len(err) <= 1100, f"the message repeats too much of the input ({len(err)} characters)"
    assert message in err, err


def refused(*argv, message: str = "") -> str:
    code, out, err = cli(*argv)
    assert_one_line_error(code, out, err, message)
    return err


def strict_json(text: str):
    """JSON as the standard defines it: NaN and Infinity are not numbers."""

    def constant(name):
        raise AssertionError(f"{name} in the JSON output")

    return json.loads(text, parse_constant=constant)


def answered(*argv, codes=(0,)):
    code, out, err = cli(*argv, "--format", "json")
    assert code in codes and "Traceback" not in err, (code, err[:500])
    return strict_json(out)


def renders(*argv, codes=(0,)) -> str:
    """The table for people renders too (it is where floats used to overflow)."""
    code, out, err = cli(*argv)
    assert code in codes and err == "" and out, (code, err[:500])
    return out


def exact_int(text: str) -> int:
    """The integer a command-line number means, by Decimal alone (the oracle for parse_number)."""
    value = Decimal(text.strip().replace("_", ""))
    assert value == value.to_integral_value()
    return int(value)


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- files: refused by what they hold


def _bomb() -> str:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


REFUSED_FILES = [
    ("deep-array.json", "[" * DEEP + "]" * DEEP, "nested more than 32 levels"),
    ("deep-object.json", '{"a": ' * DEEP + "1" + "}" * DEEP, "nested more than 32 levels"),
    ("deep-array.toml", "a = " + "[" * DEEP + "]" * DEEP, "nested more than 32 levels"),
    ("deep-inline-table.toml", "a = " + "{b = " * DEEP + "1" + "}" * DEEP, "nested more than 32 levels"),
    ("deep-dotted-key.toml", "a" + ".a" * DEEP + " = 1\n", "dotted key nested more than 32 levels"),
    ("deep-table-header.toml", "[" + "a." * DEEP + "a]\nx = 1\n", "dotted key nested more than 32 levels"),
    ("deep-flow.yaml", "[" * DEEP + "]" * DEEP, "nested more than 32 levels"),
    ("deep-flow-mapping.yaml", "{a: " * DEEP + "1" + "}" * DEEP, "nested more than 32 levels"),
    ("deep-block.yaml", "- " * DEEP + "x\n", "nest"),
    ("deep-indent.yaml", "".join(" " * i + "a:\n" for i in range(1200)), "nest"),
    ("nested-40.json", '{"name": ' + "[" * 40 + "]" * 40 + "}", "nested more than 32 levels"),
    ("nested-40.toml", "name = " + "[" * 40 + "]" * 40 + "\n", "nested more than 32 levels"),
    ("nested-40.yaml", "name:\n" + "".join("  " * i + "- \n" for i in range(1, 40)), "nest"),
    ("anchor-bomb.yaml", _bomb(), "more than 100,000 values"),
    ("alias-cycle.yaml", "a: &a [*a]\n", "nested more than 32 levels"),
    ("huge-int.json", '{"vocab_size": ' + "9" * 5000 + "}", "integer too large"),
    ("huge-int.toml", "vocab_size = " + "9" * 5000 + "\n", "integer too large"),
    ("huge-int.yaml", "vocab_size: " + "9" * 5000 + "\n", "integer too large"),
    ("huge-negative-int.toml", "vocab_size = -" + "9" * 5000 + "\n", "integer too large"),
    ("int-over-limit.json", '{"vocab_size": ' + str(MAX_INTEGER + 1) + "}", "integer too large"),
    ("int-over-limit.toml", "vocab_size = " + str(MAX_INTEGER + 1) + "\n", "integer too large"),
    ("int-over-limit.yaml", "vocab_size: " + str(MAX_INTEGER + 1) + "\n", "integer too large"),
    ("duplicate.json", '{"name": "a", "name": "b"}', "duplicate key 'name'"),
    ("duplicate-nested.json", '{"a": {"x": 1, "x": 2}}', "duplicate key 'x'"),
    ("duplicate.yaml", "name: a\nvocab_size: 1\nname: b\n", "duplicate key 'name'"),
    ("duplicate-quoted.yaml", "name: a\n'name': b\n", "duplicate key 'name'"),
    ("duplicate.toml", 'name = "a"\nname = "b"\n', "duplicate key 'name'"),
    ("duplicate-table.toml", "[a]\nx = 1\n[a]\ny = 2\n", "duplicate key 'a'"),
    ("nan.json", '{"vocab_size": NaN}', "NaN is not a finite number"),
    ("infinity.json", '{"vocab_size": Infinity}', "Infinity is not a finite number"),
    ("minus-infinity.json", '{"vocab_size": -Infinity}', "-Infinity is not a finite number"),
    ("overflowing-float.json", '{"vocab_size": 1e400}', "vocab_size: inf is not a finite number"),
    ("inf.toml", "vocab_size = inf\n", "vocab_size: inf is not a finite number"),
    ("nan.toml", "vocab_size = nan\n", "vocab_size: nan is not a finite number"),
    ("inf-in-array.toml", "x = [1.0, -inf]\n", "x[1]: -inf is not a finite number"),
    ("inf.yaml", "vocab_size: .inf\n", "vocab_size: inf is not a finite number"),
    ("nan.yaml", "vocab_size: .nan\n", "vocab_size: nan is not a finite number"),
    ("too-large.json", '{"name": "' + "x" * (2 << 20) + '"}', "larger than 1,048,576 bytes"),
    ("just-too-large.toml", SPEC_TOML + "#" * (MAX_FILE_BYTES - len(SPEC_TOML) + 1), "larger than 1,048,576 bytes"),
    ("latin-1.toml", b"name = '\xe9'\n", "not UTF-8 text"),
    ("utf-16.json", '{"name": "x"}'.encode("utf-16"), "not UTF-8 text"),
    ("empty.toml", "", "file is empty"),
    ("blank.yaml", "  \n\n", "file is empty"),
    ("comment-only.yaml", "# nothing here\n", "the top level must be a table"),
    ("list.json", "[1, 2]", "the top level must be a table"),
    ("string.json", '"gpt2"', "the top level must be a table"),
    ("scalar.yaml", "42\n", "the top level must be a table"),
    ("two-documents.yaml", "a: 1\n---\nb: 2\n", "malformed YAML"),
    ("spec.txt", SPEC_TOML, "unsupported file type '.txt'"),
    ("integer-keys.yaml", "1: 2\n", "keys must be text, got 1"),
    ("unhashable-key.yaml", "? [a, b]\n: 1\n", "malformed YAML"),
    ("python-tag.yaml", "name: !!python/object/apply:os.system ['echo hi']\n", "malformed YAML"),
    ("unclosed.toml", "x = [", "malformed TOML"),
    ("unclosed.json", "{", "malformed JSON"),
    ("unclosed.yaml", "a: [1,", "malformed YAML"),
    ("tab-indent.yaml", "a:\n\t- 1\n", "malformed YAML"),
    ("trailing-comma.json", '{"name": "x",}', "malformed JSON"),
    ("float-for-int.toml", SPEC_TOML.replace("1000", "1000.0"), "vocab_size: Input should be a valid integer"),
    ("exponent-for-int.json", json.dumps({**SPEC, "vocab_size": 1e3}), "vocab_size: Input should be a valid integer"),
    ("bool-for-int.toml", SPEC_TOML.replace("1000", "true"), "vocab_size: Input should be a valid integer"),
    ("list-for-int.toml", SPEC_TOML.replace("1000", "[1000]"), "vocab_size: Input should be a valid integer"),
    ("table-for-int.toml", SPEC_TOML.replace("1000", "{ a = 1 }"), "vocab_size: Input should be a valid integer"),
    ("string-for-int.yaml", SPEC_YAML.replace("1000", "'1000'"), "vocab_size: Input should be a valid integer"),
    ("date-for-name.toml", SPEC_TOML.replace('"mine"', "2020-01-01"), "name: Input should be a valid string"),
    ("date-for-name.yaml", SPEC_YAML.replace("mine", "2020-01-01"), "name: Input should be a valid string"),
    ("unknown-field.toml", SPEC_TOML + 'colour = "red"\n', "unknown field 'colour'"),
    ("misspelt-field.toml", SPEC_TOML + "d_modle = 5\n", "did you mean 'd_model'"),
    ("missing-field.toml", SPEC_TOML.replace("n_heads = 4\n", ""), "missing required field 'n_heads'"),
    ("zero-layers.toml", SPEC_TOML.replace("decoder_layers = 2", "decoder_layers = 0"), "both 0"),
    ("negative.toml", SPEC_TOML.replace("d_model = 64", "d_model = -64"), "d_model: Input should be greater"),
    ("upper-case-name.json", json.dumps({**SPEC, "name": "A" * 500_000}), "name: String should match pattern"),
    ("huge-unknown-key.json", json.dumps({**SPEC, "k" * 500_000: 1}), "unknown field 'kkkk"),
    ("huge-string-value.json", json.dumps({**SPEC, "position": "r" * 900_000}), "position: unknown kind"),
    ("nul-in-name.json", json.dumps({**SPEC, "name": "a\u0000b"}), "name: String should match pattern"),
    ("family-file.toml", "[models.a]\nvocab_size = 1\n", "looks like a preset family file"),
]


@pytest.mark.parametrize("name, content, message", REFUSED_FILES, ids=[c[0] for c in REFUSED_FILES])
def test_a_hostile_file_is_refused_in_one_line(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    refused("params", path, message=message)
    with pytest.raises(SpecError, match=None) as info:  # the API says the same
        load_spec(path)
    assert message in str(info.value) and "\n" not in str(info.value)


SPECIAL = [
    ("zero.json", "/dev/zero", "is a character device"),
    ("zero.toml", "/dev/zero", "is a character device"),
    ("urandom.yaml", "/dev/urandom", "is a character device"),
    ("urandom.json", "/dev/urandom", "is a character device"),
    ("null.toml", "/dev/null", "is a character device"),
]


@pytest.mark.parametrize("name, target, message", SPECIAL, ids=[s[0] for s in SPECIAL])
def test_a_symlink_to_a_device_is_refused_without_reading_it(tmp_path, name, target, message):
    if not os.path.exists(target):
        pytest.skip(f"{target} does not exist here")
    link = tmp_path / name
    link.symlink_to(target)
    refused("params", str(link), message=message)


@pytest.mark.parametrize("suffix", [".toml", ".json", ".yaml"])
def test_a_fifo_is_refused_without_blocking(tmp_path, suffix):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    path = tmp_path / f"pipe{suffix}"
    os.mkfifo(path)  # nobody writes to it: opening it for reading would block for ever
    refused("params", str(path), message="is a named pipe (FIFO)")
    refused("validate", str(path), message="is a named pipe (FIFO)")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: (p / "dir.toml").mkdir() or p / "dir.toml", "is a directory"),
        (lambda p: p, "is a directory"),
        (lambda p: (p / "loop.toml").symlink_to(p / "loop.toml") or p / "loop.toml", "symbolic links"),
        (lambda p: (p / "dangling.toml").symlink_to(p / "nowhere.toml") or p / "dangling.toml", "no such file"),
        (lambda p: p / ("x" * 300 + ".toml"), "file name too long"),
        (lambda p: (p / "f.toml").write_text(SPEC_TOML) and p / "f.toml" / "g.toml", "no such file"),
        (lambda p: p / "missing.toml", "no such file"),
        (lambda p: p / "missing.json", "no such file"),
    ],
    ids=["directory", "directory-no-suffix", "symlink-loop", "dangling", "name-too-long", "file-as-dir", "missing",
         "missing-json"],
)  # fmt: skip
def test_a_path_that_is_not_a_readable_file_is_refused(tmp_path, make, message):
    path = make(tmp_path)
    refused("params", str(path), message=message)


def test_a_long_path_is_shortened_in_the_message(tmp_path):
    err = refused("params", str(tmp_path / ("y" * 5000 + ".toml")), message="file name too long")
    assert len(err) < 400


# ---------------------------------------------------------------- files: accepted, with the right answer


ACCEPTED_FILES = [
    ("bom.toml", "\ufeff" + SPEC_TOML, SPEC),
    ("bom.json", "\ufeff" + json.dumps(SPEC), SPEC),
    ("bom.yaml", "\ufeff" + SPEC_YAML, SPEC),
    ("crlf.toml", SPEC_TOML.replace("\n", "\r\n"), SPEC),
    ("flow-mapping.yaml", "{" + SPEC_YAML.strip().replace("\n", ", ") + "}", SPEC),
    ("exactly-1mib.toml", SPEC_TOML + "#" * (MAX_FILE_BYTES - len(SPEC_TOML)), SPEC),
    ("int-at-limit.json", json.dumps({**SPEC, "vocab_size": MAX_INTEGER}), {**SPEC, "vocab_size": MAX_INTEGER}),
    ("int-at-limit.toml", SPEC_TOML.replace("1000", str(MAX_INTEGER)), {**SPEC, "vocab_size": MAX_INTEGER}),
    ("int-at-limit.yaml", SPEC_YAML.replace("1000", str(MAX_INTEGER)), {**SPEC, "vocab_size": MAX_INTEGER}),
    ("huge-width.toml", SPEC_TOML.replace("d_model = 64", "d_model = " + str(4 * 10**300)),
     {**SPEC, "d_model": 4 * 10**300}),
    ("underscored.toml", SPEC_TOML.replace("1000", "1_000"), SPEC),
    ("quoted-keys.toml", SPEC_TOML.replace("vocab_size", '"vocab_size"'), SPEC),
    ("unicode-comment.toml", "# ☃ — ünïcödé\n" + SPEC_TOML, SPEC),
    ("long-valid-name.json", json.dumps({**SPEC, "name": "a" * 100_000}), {**SPEC, "name": "a" * 100_000}),
]  # fmt: skip


@pytest.mark.parametrize("name, content, data", ACCEPTED_FILES, ids=[c[0] for c in ACCEPTED_FILES])
def test_an_extreme_but_valid_file_gives_the_exact_count(tmp_path, name, content, data):
    path = write(tmp_path, name, content)
    (obj,) = answered("params", path)
    assert obj["total"] == count_params(ModelSpec(**data)).total
    renders("params", path)


def test_yaml_merge_keys_may_be_overridden_but_not_duplicated(tmp_path):
    text = "base: &b {vocab_size: 7, d_model: 64}\nspec:\n  <<: *b\n  vocab_size: 1000\n"
    from archspec.io.loading import read_mapping

    assert read_mapping(write(tmp_path, "m.yaml", text))["spec"] == {"vocab_size": 1000, "d_model": 64}


# ---------------------------------------------------------------- --set: exact, validated, or one line


SET_ACCEPTED = [
    ("vocab_size", "1e19"),
    ("vocab_size", "300e9"),
    ("vocab_size", "50_304"),
    ("vocab_size", "1.5e4"),
    ("vocab_size", "2.0"),
    ("vocab_size", "+50257"),
    ("vocab_size", " 50257 "),
    ("vocab_size", "1e308"),
    ("vocab_size", str(MAX_INTEGER)),
    ("vocab_size", "0.00000000000000000000000000000000000000001e45"),
    ("max_positions", "1e19"),
    ("d_model", "12e150"),
    ("d_ff", "1" + "0" * 300),
    ("decoder_layers", "1e12"),
    ("encoder_layers", "3"),
    ("n_kv_heads", "4"),
    ("name", "1e5"),
    ("name", "nan"),
    ("bias", "false"),
    ("bias", "TRUE"),
    ("position", "rotary"),
]


@pytest.mark.parametrize("field, text", SET_ACCEPTED, ids=[f"{f}={t[:20]}" for f, t in SET_ACCEPTED])
def test_set_reads_a_value_exactly_and_counts_it(field, text):
    kind = ModelSpec.model_fields[field].annotation
    boolean = kind is bool or bool in typing.get_args(kind)  # bias: a bool or a table
    expected = exact_int(text) if kind is int else (text.strip().lower() == "true") if boolean else text.strip()
    (obj,) = answered("params", "gpt2", "--set", f"{field}={text}")
    assert obj["total"] == count_params(GPT2.replace(**{field: expected})).total
    (shown,) = answered("show", "gpt2", "--set", f"{field}={text}")
    assert shown[field] == expected
    renders("params", "gpt2", "--set", f"{field}={text}")


def test_vocab_size_1e19_is_the_integer_ten_to_the_nineteenth():
    (obj,) = answered("params", "gpt2", "--set", "vocab_size=1e19")
    assert obj["components"]["embed"] == 10**19 * 768  # tied: one V x d matrix
    assert obj["total"] == GPT2_TOTAL + (10**19 - 50257) * 768


SET_REFUSED = [
    ("d_model=._", "d_model: Input should be a valid integer (got '._')"),
    ("d_model=4097.0000000000001", "'4097.0000000000001' is not a whole number"),
    ("d_model=1.5", "is not a whole number"),
    ("d_model=2e-3", "is not a whole number"),
    ("d_model=1e-400", "is not a whole number"),
    ("d_model=1e400", "integer too large"),
    ("vocab_size=1.8e308", "integer too large"),
    ("vocab_size=" + str(MAX_INTEGER + 1), "integer too large"),
    ("d_model=" + "9" * 900, "integer too large"),
    ("d_model=" + "9" * 5000, "too long for a number"),
    ("d_model=1e999999999", "exponents are limited"),
    ("d_model=nan", "'nan' is not a finite number"),
    ("d_model=NaN", "is not a finite number"),
    ("d_model=inf", "'inf' is not a finite number"),
    ("d_model=-inf", "is not a finite number"),
    ("d_model=Infinity", "is not a finite number"),
    ("d_model=0x10", "--set d_model: '0x10' is not a number"),
    ("d_model=1__024", "is not a number"),
    ("d_model=1_", "is not a number"),
    ("d_model=", "d_model: Input should be a valid integer"),
    ("d_model=+", "d_model: Input should be a valid integer"),
    ("d_model=1 024", "is not a number"),
    ("d_model=-8", "d_model: Input should be greater than or equal to 1"),
    ("vocab_size=0", "vocab_size: Input should be greater than or equal to 1"),
    ("n_heads=١٢", "n_heads: Input should be a valid integer"),
    ("n_heads=7", "not divisible by n_heads=7"),
    ("n_kv_heads=5", "not divisible by n_kv_heads=5"),
    ("max_positions=true", "max_positions: Input should be a valid integer"),
    ("bias=maybe", "bias: Input should be a valid boolean"),
    ("bias=1", "bias: Input should be a valid boolean"),
    ("position=ROTARY", "position: unknown kind 'ROTARY'; use one of 'learned', 'sinusoidal', 'rotary'"),
    ("position=", "position: unknown kind ''; use one of 'learned'"),
    ("norm=batchnorm", "'layernorm' or 'rmsnorm'"),
    ("name=UPPER", "name: String should match pattern"),
    ("name=", "name: String should match pattern"),
    ("name=" + "A" * 100_000, "name: String should match pattern"),
    ("colour=red", "unknown field 'colour'"),
    ("d_modle=5", "did you mean 'd_model'"),
    ("k" * 100_000 + "=1", "unknown field 'kkk"),
    ("=5", "the field name is empty"),
    ("d_model", "expected FIELD=VALUE"),
    ("", "expected FIELD=VALUE"),
    ("decoder_layers=0", "both 0"),
    ("pooler=true", "pooler=true needs an encoder"),
]


def test_a_bad_moe_weight_input_is_one_line_naming_the_field():
    moe = ["--set", "mlp.kind=moe", "--set", "mlp.experts=4", "--set", "mlp.top_k=1", "--set", "mlp.d_expert=64"]
    message = "mlp.weight_input: Input should be a valid boolean"
    refused("params", "gpt2", *moe, "--set", "mlp.weight_input=maybe", message=message)


@pytest.mark.parametrize("extra, message", [
    (["--set", "mlp.d_dense=64"], "mlp.d_dense (Gemma 4's dense MLP beside the experts) needs norm_position"),
    (["--set", "mlp.d_dense=-1"], "mlp.d_dense: Input should be greater than or equal to 0"),
    (["--set", "mlp.router_norm=maybe"], "mlp.router_norm: Input should be a valid boolean"),
    (["--set", "mlp.expert_scales=maybe"], "mlp.expert_scales: Input should be a valid boolean"),
], ids=["d_dense-pre", "d_dense-negative", "router_norm", "expert_scales"])  # fmt: skip
def test_a_bad_gemma4_moe_field_is_one_line_naming_the_field(extra, message):
    moe = ["--set", "mlp.kind=moe", "--set", "mlp.experts=4", "--set", "mlp.top_k=1", "--set", "mlp.d_expert=64"]
    refused("params", "gpt2", *moe, *extra, message=message)


@pytest.mark.parametrize("extra, message", [
    (["--set", "attention_norm=false"], "attention_norm=false (no norm before the token mixer) needs norm_position"),
    (["--set", "attention_norm=maybe"], "attention_norm: Input should be a valid boolean"),
    (["--set", "head.kind=mlm", "--set", "head.dense_bias=maybe"], "head.dense_bias: Input should be a valid boolean"),
    (["--set", "head=discriminator"], "head kind 'discriminator' has no vocabulary projection to tie"),
    (["--set", "position=disentangled", "--set", "decoder_layers=2"], "disentangled positions (DeBERTa) are for an"),
    (["--set", "position=disentangled", "--set", "position.c2p=false", "--set", "position.p2c=false"],
     "position: disentangled positions need c2p or p2c"),
    (["--set", "position=disentangled", "--set", "position.buckets=-1"],
     "position.buckets: Input should be greater than or equal to 0"),
], ids=["attention_norm-post", "attention_norm-not-bool", "mlm-dense_bias", "discriminator-tied",
        "disentangled-decoder", "disentangled-no-terms", "disentangled-buckets"])  # fmt: skip
def test_a_bad_encoder_field_is_one_line_naming_the_field(extra, message):
    refused("params", "bert-base", "--set", "norm_position=post", *extra, message=message)


@pytest.mark.parametrize("extra, message", [
    (["--set", "position.proportional=maybe"], "position.proportional: Input should be a valid boolean"),
    (["--set", "position.proportional=true", "--set", "position.interleaved=true"],
     "position: proportional turns pairs of the two halves; it excludes interleaved"),
    (["--set", "position.proportional=true", "--set", "position.fraction=0.01"],
     "rotary positions need an even rotated width of at least 2"),
], ids=["not-a-bool", "interleaved", "too-few-pairs"])  # fmt: skip
def test_a_bad_proportional_rotary_is_one_line_naming_the_field(extra, message):
    refused("params", "gpt2", "--set", "position.kind=rotary", *extra, message=message)


@pytest.mark.parametrize("model, extra, message", [
    ("bert-base", [], "transformer_xl positions (relative attention, Dai et al. 2019) are for a decoder-only model"),
    ("gpt2", ["--set", "d_model=769", "--set", "d_head=64"],
     "transformer_xl positions need an even d_model for their sinusoidal encodings, got d_model=769"),
    ("gpt2", ["--set", "attention.kind=mamba2", "--set", "attention.heads=4", "--set", "attention.head_dim=8"],
     "transformer_xl positions score the queries of standard attention; mixer kind 'mamba2'"),
    ("gpt2", ["--set", "position.per_layer=maybe"], "position.per_layer: Input should be a valid boolean"),
    ("gpt2", ["--set", "position.buckets=8"], "position.buckets"),
], ids=["encoder", "odd-d_model", "recurrent-mixer", "per_layer-not-bool", "foreign-field"])  # fmt: skip
def test_a_bad_transformer_xl_position_is_one_line_naming_the_field(model, extra, message):
    refused("params", model, "--set", "position=transformer_xl", *extra, message=message)


@pytest.mark.parametrize("extra, message", [
    (["--set", "embedding.d_embed=256"], "a tied lm head reads the d_embed=256 wide token table: it needs "
                                         "embedding.project_out=true"),
    (["--set", "embedding.project_out=true"], "embedding.project_out, embedding.position_width and "
                                              "embedding.projection_bias shape the projections"),
    (["--set", "embedding.position_width=d_head"], "embedding.position_width: Input should be 'd_embed' or 'd_model'"),
    (["--set", "embedding.d_embed=256", "--set", "embedding.project_out=true", "--set", "head=discriminator",
      "--set", "tie_embeddings=false"], "embedding.project_out feeds an lm head (or none)"),
], ids=["tied-narrow", "projection-without-d_embed", "position-width", "project-out-discriminator"])  # fmt: skip
def test_a_bad_factorised_embedding_is_one_line_naming_the_field(extra, message):
    refused("params", "gpt2", *extra, message=message)


def test_a_bad_value_norm_is_one_line_naming_the_field():
    message = "attention.value_norm: Input should be a valid boolean"
    refused("params", "gpt2", "--set", "attention.value_norm=maybe", message=message)


@pytest.mark.parametrize("item, message", SET_REFUSED, ids=[i[:30] for i, _ in SET_REFUSED])
def test_a_bad_set_value_is_one_line_naming_the_field(item, message):
    refused("params", "gpt2", "--set", item, message=message)


def test_a_newline_in_a_value_stays_on_one_line():
    refused("params", "gpt2", "--set", "name=a\nb\nc", message="name: String should match pattern")
    refused("params", "gpt2", "--set", "d_model=1\n2", message="is not a number")


# ---------------------------------------------------------------- totals beyond the float range


HUGE = [
    ("params", "gpt2", "--set", "vocab_size=1e300", "--set", "d_model=12e10"),
    ("params", "bert-base", "--set", "d_model=12e200"),
    ("compare", "gpt2", "bert-base", "--set", "d_model=12e200"),
    ("flops", "gpt2", "--set", "d_model=12e100", "--tokens", "1e200"),
    ("flops", "transformer-base", "--set", "d_model=8e100", "--seq-len", "1e100", "--src-len", "3"),
    ("flops", "gpt2", "--set", "d_model=12e100", "--tokens", "1e200", "--gpu", "h100", "--gpus", "1e100"),
    ("memory", "gpt2", "--set", "d_model=12e100", "--gpu", "h100"),
    ("memory", "transformer-base", "--seq-len", "1e150", "--batch", "1e150"),
    ("show", "gpt2", "--set", "vocab_size=1e300"),
    ("validate", "gpt2", "--set", "vocab_size=1e300"),
]


@pytest.mark.parametrize("argv", HUGE, ids=[" ".join(a[:2] + a[3:4]) for a in HUGE])
@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "csv"])
def test_numbers_beyond_the_float_range_render_in_every_format(argv, fmt):
    code, out, err = cli(*argv, "--format", fmt)
    assert code in ((0, 1) if argv[0] == "validate" else (0,)) and err == "", err[:300]
    if fmt == "json":
        strict_json(out)
    assert not re.search(r"\b(inf|infinity|nan)\b", out.lower()), "a non-finite number in the output"


def test_a_total_beyond_the_float_range_is_exact_in_json_and_rounded_in_the_table():
    spec = GPT2.replace(vocab_size=10**300, d_model=12 * 10**10)
    total = count_params(spec).total
    assert total > 2**1024
    (obj,) = answered("params", "gpt2", "--set", "vocab_size=1e300", "--set", "d_model=12e10")
    assert obj["total"] == total
    table = renders("params", "gpt2", "--set", "vocab_size=1e300", "--set", "d_model=12e10")
    assert f"{Decimal(total):.2e}".replace("E", "e") in table


def test_flops_beyond_the_float_range_give_exact_training_totals_and_pf_days():
    spec = GPT2.replace(d_model=12 * 10**100)
    f = count_flops(spec)
    (obj,) = answered("flops", "gpt2", "--set", "d_model=12e100", "--tokens", "1e200")
    assert obj["forward"] == f.forward and obj["training_total_6nd"] == 6 * f.params * 10**200
    assert obj["pf_days"] == round(Fraction(6 * f.params * 10**200, PF_DAY))


# ---------------------------------------------------------------- numeric options


OPTION_REFUSED = [
    (["flops", "gpt2", "--tokens", "1.5"], "'1.5' is not a whole number"),
    (["flops", "gpt2", "--tokens", "1e400"], "integer too large"),
    (["flops", "gpt2", "--tokens", "nan"], "is not a finite number"),
    (["flops", "gpt2", "--tokens", "inf"], "is not a finite number"),
    (["flops", "gpt2", "--tokens=-inf"], "is not a finite number"),
    (["flops", "gpt2", "--tokens", "0"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", "-5"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", ""], "is not a number"),
    (["flops", "gpt2", "--tokens", "  "], "is not a number"),
    (["flops", "gpt2", "--tokens", "1e999999999"], "exponents are limited"),
    (["flops", "gpt2", "--tokens", "0x10"], "is not a number"),
    (["flops", "gpt2", "--tokens", "._"], "is not a number"),
    (["flops", "gpt2", "--tokens", "3 00e9"], "is not a number"),
    (["flops", "gpt2", "--tokens", "300X"], "is not a number"),
    (["flops", "gpt2", "--batch", "2.5"], "is not a whole number"),
    (["flops", "gpt2", "--batch", "0"], "must be greater than 0"),
    (["flops", "gpt2", "--batch", "-1"], "must be greater than 0"),
    (["flops", "gpt2", "--batch", "1e400"], "integer too large"),
    (["flops", "gpt2", "--batch", "nan"], "is not a finite number"),
    (["flops", "gpt2", "--seq-len", "1025"], "longer than the learned position table"),
    (["flops", "gpt2", "--seq-len", "1e19"], "longer than the learned position table"),
    (["memory", "gpt2", "--seq-len", "1e19"], "longer than the learned position table"),
    (["flops", "bert-base", "--src-len", "12"], "bert-base is encoder-only"),
    (["memory", "bert-base", "--src-len", "12"], "bert-base is encoder-only"),
    (["flops", "gpt2", "--src-len", "12"], "has no encoder"),
    (["flops", "bert-base", "--causal-half"], "bert-base is encoder-only; causal_half"),
    (["flops", "bert-large", "--causal-half", "--seq-len", "8"], "is encoder-only"),
    (["flops", "transformer-base", "--src-len", "0"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "1e400"], "integer too large"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "1e300"], "too large"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "nan"], "is not a finite number"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "inf"], "is not a finite number"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "0"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "-1"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "1e-400"], "too small"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--mfu", "0"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--mfu", "1.5"], "must be in (0, 1]"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--mfu", "nan"], "is not a finite number"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--mfu", "inf"], "is not a finite number"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--mfu", "1e-400"], "too small"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--gpus", "0"], "must be greater than 0"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--gpus", "1.5"], "is not a whole number"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpu", "tpu9"], "unknown accelerator 'tpu9'"),
    (["flops", "gpt2", "--gpu", "h100"], "needs --tokens"),
    (["flops", "gpt2", "--tokens", "1e9", "--gpus", "8"], "--gpus needs --gpu NAME or --peak-tflops"),
    (["memory", "gpt2", "--zero", "4"], "invalid choice: 4"),
    (["memory", "gpt2", "--zero", "1.5"], "invalid int value"),
    (["memory", "gpt2", "--zero", "x"], "invalid int value"),
    (["memory", "gpt2", "--tp", "0"], "must be greater than 0"),
    (["memory", "gpt2", "--pp", "1e400"], "integer too large"),
    (["memory", "gpt2", "--gpus", "12", "--tp", "8"], "not divisible"),
    (["memory", "gpt2", "--dtype", "fp7"], "invalid choice: 'fp7'"),
    (["memory", "gpt2", "--optimizer", "lion"], "invalid choice: 'lion'"),
    (["memory", "gpt2", "--recompute", "maybe"], "invalid choice: 'maybe'"),
    # compare --seq-len beyond a learned context counts at the context and marks it (tests/test_frontdoor.py)
    (["compare", "gpt2", "--seq-len", "0"], "must be greater than 0"),
    (["compare", "gpt2", "--dtype", "fp64"], "invalid choice: 'fp64'"),
    (["params", "gpt2", "--format", "xml"], "invalid choice: 'xml'"),
    (["params", "gpt2", "--format", ""], "invalid choice: ''"),
    (["params", "gpt2", "--format", "JSON"], "invalid choice: 'JSON'"),
    (["params", "gpt2", "--frobnicate"], "`archspec params` has no option --frobnicate"),
    (["params", "gpt2", "-x"], "`archspec params` has no option -x"),
    (["params", "gpt2", "--batch", "2"], "`archspec params` has no option --batch"),
    (["params", "gpt2", "--set"], "expected one argument"),
    (["flops", "gpt2", "--batch"], "expected one argument"),
    (["params"], "the following arguments are required: MODEL"),
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["--format", "json"], "invalid choice"),
    (["list", "gpt2"], "unrecognized arguments: gpt2"),
    (["schema", "--format", "yaml"], "invalid choice: 'yaml'"),
]


@pytest.mark.parametrize("argv, message", OPTION_REFUSED, ids=[" ".join(a)[:50] for a, _ in OPTION_REFUSED])
def test_a_bad_option_is_one_line_naming_it(argv, message):
    refused(*argv, message=message)


def test_tokens_1e19_and_300e9_are_exact():
    for text, D in (("1e19", 10**19), ("300e9", 300 * 10**9), (str(MAX_INTEGER), MAX_INTEGER)):
        (obj,) = answered("flops", "gpt2", "--tokens", text)
        assert obj["tokens"] == D and obj["training_total_6nd"] == 6 * GPT2_TOTAL * D
        assert obj["training_total"] == count_flops(GPT2).training_for(D)


@pytest.mark.parametrize("text, batch", [("2.0", 2), ("1e3", 1000), ("+3", 3), ("1_0", 10), ("0.5e1", 5)])
def test_batch_is_read_exactly(text, batch):
    (obj,) = answered("flops", "gpt2", "--batch", text, "--seq-len", "8")
    assert obj["batch"] == batch and obj["forward"] == count_flops(GPT2, batch, 8).forward


@pytest.mark.parametrize("peak", ["1e-280", "1e-12", "0.001", "1e15", "1e290"])
def test_tiny_and_huge_peaks_give_the_right_finite_time(peak):
    (obj,) = answered("flops", "gpt2", "--tokens", "1e9", "--peak-tflops", peak)
    expected = Fraction(obj["training_total"]) / (Fraction(peak) * 10**12 * Fraction("0.4"))
    seconds = obj["time_seconds"]
    assert isinstance(seconds, (int, float)) and math.isclose(Fraction(seconds), expected, rel_tol=1e-12)
    renders("flops", "gpt2", "--tokens", "1e9", "--peak-tflops", peak)


@pytest.mark.parametrize("peak", ["5e-324", "1e-320", "2.2e-308"])
def test_a_subnormal_peak_gives_finite_json(peak):
    (obj,) = answered("flops", "gpt2", "--tokens", "1e9", "--peak-tflops", peak)
    assert obj["time_seconds"] > 10**300  # an integer beyond the float range, never Infinity


def test_a_huge_number_of_gpus_gives_a_tiny_time_not_zero():
    (obj,) = answered("flops", "gpt2", "--tokens", "1e9", "--gpu", "h100", "--gpus", "1e300")
    assert 0 < obj["time_seconds"] < 1e-280


def test_the_causal_half_of_an_encoder_decoder_is_labelled_as_the_decoders():
    out = renders("flops", "transformer-base", "--causal-half", "--seq-len", "16")
    assert "causal half in the decoder's self-attention" in out
    (obj,) = answered("flops", "transformer-base", "--causal-half", "--seq-len", "16")
    assert obj["forward"] == count_flops(T_BASE, 1, 16, causal_half=True).forward
    assert obj["forward"] < count_flops(T_BASE, 1, 16).forward


def test_sinusoidal_models_take_any_length_exactly():
    (obj,) = answered("flops", "transformer-base", "--seq-len", "1e19", "--src-len", "1e18")
    assert obj["forward"] == count_flops(T_BASE, 1, 10**19, 10**18).forward
    (mem,) = answered("memory", "transformer-base", "--seq-len", "1e19")
    assert mem["kv_cache_bytes"] == estimate_memory(T_BASE, 1, 10**19).kv_cache_bytes


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["params", "--help"], ["flops", "-h"]])
def test_help_and_version_exit_0(argv):
    code, out, err = cli(*argv)
    assert code == 0 and out and err == ""


# ---------------------------------------------------------------- MODEL arguments


MODEL_REFUSED = [
    ("", "unknown preset ''"),
    (" ", "unknown preset"),
    ("GPT-2", "did you mean 'gpt2'"),  # preset names in any case: GPT2 is gpt2 (test_hostile_surfaces)
    ("gpt2 ", "did you mean 'gpt2'"),
    ("x" * 300, "unknown preset 'xxxx"),
    ("x" * 100_000, "unknown preset 'xxxx"),
    ("a/b", "no such file"),
    (".toml", "no such file"),
    ("/", "is a directory"),
    ("/dev/zero", "is a character device"),
    ("/dev/null", "is a character device"),
    ("/etc/passwd", "unsupported file type"),
    ("-", "unknown preset '-'"),
    ("☃", "unknown preset '☃'"),
]


@pytest.mark.parametrize("ref, message", MODEL_REFUSED, ids=[r[:20] or "empty" for r, _ in MODEL_REFUSED])
def test_a_bad_model_reference_is_one_line(ref, message):
    if ref.startswith("/") and not os.path.exists(ref):
        pytest.skip(f"{ref} does not exist here")
    err = refused("params", ref, message=message)
    assert len(err) < 400


# ---------------------------------------------------------------- validate: claims are data


FAMILY = """
[defaults]
vocab_size = 50257
max_positions = 1024

[models.my-gpt]
decoder_layers = 12
d_model = 768
n_heads = 12
"""
MY_GPT_TOTAL = count_params(
    ModelSpec(name="my-gpt", vocab_size=50257, max_positions=1024, decoder_layers=12, d_model=768, n_heads=12)
).total
CLAIM = '[[models.my-gpt.claims]]\nquantity = "params"\nprinted = "124M"\nsource = "card"\n'
COMPUTE = '[[models.my-gpt.claims]]\nquantity = "training_flops"\nprinted = "1e21"\nsource = "x"\n'

CLAIMS_REFUSED = [
    (CLAIM.replace('"124M"', '"nan"'), "claimed figure 'nan' is not a number"),
    (CLAIM.replace('"124M"', '"NaN"'), "is not a number"),
    (CLAIM.replace('"124M"', '"Infinity"'), "claimed figure 'Infinity' is not a number"),
    (CLAIM.replace('"124M"', '"-Infinity"'), "is not a number"),
    (CLAIM.replace('"124M"', '"inf"'), "is not a number"),
    (CLAIM.replace('"124M"', '"1e999999999"'), "exponents are limited"),
    (CLAIM.replace('"124M"', '"1e-999999999"'), "exponents are limited"),
    (CLAIM.replace('"124M"', '"0"'), "must be positive"),
    (CLAIM.replace('"124M"', '"-5M"'), "must be positive"),
    (CLAIM.replace('"124M"', '"1.2.3"'), "is not a number"),
    (CLAIM.replace('"124M"', '""'), "printed"),
    (CLAIM.replace('"124M"', '"1" * 0'), "malformed TOML"),
    (CLAIM.replace('"124M"', '"' + "1" * 70 + '"'), "printed: String should have at most 64 characters"),
    (CLAIM.replace('"124M"', "124"), "printed: Input should be a valid string"),
    (CLAIM.replace('"124M"', '["124M"]'), "printed: Input should be a valid string"),
    (CLAIM.replace('"card"', '["card"]'), "source: Input should be a valid string"),
    (CLAIM.replace('"params"', '["params"]'), "quantity"),
    (CLAIM + "precision = inf\n", "precision: inf is not a finite number"),
    (CLAIM + "precision = nan\n", "precision: nan is not a finite number"),
    (CLAIM + "precision = -1.0\n", "precision: Input should be greater than 0"),
    (CLAIM + "precision = 0\n", "precision: Input should be greater than 0"),
    (CLAIM + "precision = 1e300\n", "larger than the claimed figure"),
    (CLAIM + "precision = [1]\n", "precision: Input should be a valid number"),
    (CLAIM + "solve_for = ['vocab_size']\n", "solve_for"),
    (CLAIM + "solve_for = 'd_model'\n", "solve_for"),
    (CLAIM + "what_if = { vocab_size = [1, 2] }\n", "what_if.vocab_size must be a number"),
    (CLAIM + "what_if = { vocab_size = { a = 1 } }\n", "what_if.vocab_size must be a number"),
    (CLAIM + "what_if = { colour = 1 }\n", "unknown spec field 'colour'"),
    (CLAIM + "what_if = { n_heads = 7 }\n", "what_if: d_model=768 is not divisible by n_heads=7"),
    (CLAIM + "what_if = { vocab_size = 1.5 }\n", "vocab_size: Input should be a valid integer"),
    (CLAIM + "what_if = [1]\n", "what_if: Input should be a valid dictionary"),
    (CLAIM + "what_if_source = 'x'\n", "what_if_source names the source of a what_if"),
    (CLAIM + "tokens = 1e9\n", "tokens: only compute claims"),
    (CLAIM + "method = '6nd'\n", "method: only compute claims"),
    (COMPUTE + "method = '6nd'\ntokens = 0.5\n", "tokens must be a whole number"),
    (COMPUTE + "method = '6nd'\ntokens = 0\n", "tokens: Input should be greater than or equal to 1"),
    (COMPUTE + "method = '6nd'\ntokens = -1\n", "tokens: Input should be greater than or equal to 1"),
    (COMPUTE + "method = '6nd'\ntokens = inf\n", "tokens: inf is not a finite number"),
    (COMPUTE + "method = '6nd'\ntokens = nan\n", "not a finite number"),
    (COMPUTE + "method = '6nd'\ntokens = 1.5\n", "tokens must be a whole number"),
    (COMPUTE + "method = '6nd'\ntokens = '1e400'\n", "integer too large"),
    (COMPUTE + "method = '6nd'\ntokens = [1]\n", "tokens"),
    (COMPUTE + "method = '6nd'\ntokens = 1e9\nseq_len = 8\n", "seq_len: the 6nd method does not read them"),
    (COMPUTE + "method = '6nd'\ntokens = 1e9\nusing_params = 'nan'\n", "using_params 'nan' is not a number"),
    (COMPUTE + "method = 'exact'\ntokens = 1e9\nseq_len = 4096\n", "longer than the learned position table"),
    (COMPUTE + "method = 'exact'\ntokens = 1e9\nseq_len = 0\n", "seq_len: Input should be greater than"),
    (COMPUTE + "method = 'exact'\ntokens = 1e9\nseq_len = 1024\nwhat_if = { max_positions = 512 }\n",
     "seq_len for the what_if spec"),
    (COMPUTE + "method = 'exact'\ntokens = 1e9\nsolve_for = 'vocab_size'\n", "solve_for applies to params"),
    (COMPUTE + "method = 'hardware'\ngpus = 8\nhours = 1\n", "needs tflops"),
    (COMPUTE + "method = 'hardware'\ngpus = 8\nhours = 1\ntflops = inf\n", "tflops: inf is not a finite number"),
    (COMPUTE + "method = 'hardware'\ngpus = 8\nhours = nan\ntflops = 1\n", "hours: nan is not a finite number"),
    (COMPUTE + "method = 'hardware'\ngpus = 0\nhours = 1\ntflops = 1\n", "gpus: Input should be greater"),
    (COMPUTE + "method = 'hardware'\ngpus = [8]\nhours = 1\ntflops = 1\n", "gpus: Input should be a valid integer"),
    (COMPUTE + "method = 'hardware'\ngpus = 8\nhours = 1\ntflops = 1\ntokens = 5\n", "tokens: the hardware method"),
    (COMPUTE + "method = 'hardware'\ngpus = 8\nhours = 1\ntflops = 1\ngpu = [1]\n", "gpu: Input should be"),
    (COMPUTE + "method = 'quantum'\n", "method"),
    (COMPUTE, "needs a method"),
]  # fmt: skip


@pytest.mark.parametrize("claim, message", CLAIMS_REFUSED, ids=[f"claim-{i}" for i in range(len(CLAIMS_REFUSED))])
def test_a_hostile_claim_is_one_line_before_anything_is_computed(tmp_path, claim, message):
    path = write(tmp_path, "claims.toml", FAMILY + claim)
    refused("validate", path, message=message)


FAMILY_REFUSED = [
    (FAMILY + "claims = 5\n", "models.my-gpt.claims must be an array of tables"),
    (FAMILY + "claims = [1]\n", "Input should be a valid dictionary"),
    (FAMILY + "claims = [[1]]\n", "Input should be a valid dictionary"),
    (FAMILY + "summary = [1]\n", "models.my-gpt.summary must be text"),
    (FAMILY + "printed = [1]\n", "models.my-gpt.printed must be a table"),
    (FAMILY.replace("d_model = 768", "d_model = [768]") + CLAIM, "d_model: Input should be a valid integer"),
    (FAMILY.replace("d_model = 768", "d_model = { a = 1 }") + CLAIM, "d_model: Input should be a valid integer"),
    (FAMILY.replace("[models.my-gpt]", "[models.my-gpt]\nname = 'other'"), "has name='other'"),
    ("[models]\n", "no [models.NAME] tables found"),
    ("models = 3\n", "no [models.NAME] tables found"),
    ("[models.a]\n[colour]\n", "unknown top-level key(s) ['colour']"),
    (SPEC_TOML, "this is a spec file"),
]


@pytest.mark.parametrize("text, message", FAMILY_REFUSED, ids=[f"family-{i}" for i in range(len(FAMILY_REFUSED))])
def test_a_hostile_claims_file_is_one_line(tmp_path, text, message):
    refused("validate", write(tmp_path, "claims.toml", text), message=message)


@pytest.mark.parametrize("name", ["gpt2", "deberta-v3-base", "albert-base-v2"])
def test_validate_of_a_hugging_face_config_says_it_holds_no_claims(name):
    """A released config.json (with model_type, or, as ALBERT's, only architectures) given to validate: one
    line saying what it is and which command counts it, not a list of its keys."""
    err = refused("validate", str(Path(__file__).parent / "data" / "hf" / f"{name}.json"),
                  message="is a Hugging Face config.json, which holds no claims")  # fmt: skip
    assert "archspec params" in err and "unknown top-level" not in err


def test_precision_inf_can_no_longer_match_anything(tmp_path):
    path = write(tmp_path, "c.toml", FAMILY + CLAIM.replace("124M", "999T") + "precision = inf\n")
    refused("validate", path, message="precision")


# a precision is bounded by the printed text: no coarser than the figure, no finer than its last digit
PRECISIONS = [  # (printed, precision, accepted)
    ("124M", 1e-300, False), ("124M", 5e-324, False), ("124M", 1e5, False), ("124M", 0.5, False),
    ("124439808", 0.1, False), ("124439808", 1e-300, False), ("124.4M", 1e4, False),
    ("124M", 1e6, True), ("124M", 1e7, True), ("340M", 1e6, True), ("124439808", 1.0, True), ("124.4M", 1e5, True),
]  # fmt: skip


@pytest.mark.parametrize("printed, precision, accepted", PRECISIONS, ids=[f"{p}@{q:g}" for p, q, _ in PRECISIONS])
def test_a_degenerate_precision_is_refused_and_never_a_match(tmp_path, printed, precision, accepted):
    claim = CLAIM.replace("124M", printed) + f"precision = {precision!r}\n"
    path = write(tmp_path, "c.toml", FAMILY + claim)
    if not accepted:
        refused("validate", path, message=f"precision {precision:g} is finer than the last digit printed")
        return
    (obj,) = answered("validate", path, codes=(0, 1))
    (c,) = obj["claims"]
    # independently: the claimed figure from its digits, and rounding half up at the precision, by Decimal
    claimed = Decimal(printed.replace("M", "e6"))
    unit = Decimal(repr(precision))
    nearest = (Decimal(MY_GPT_TOTAL) / unit + Decimal("0.5")).to_integral_value(rounding="ROUND_FLOOR")
    assert (c["status"] == "match") == (nearest == (claimed / unit + Decimal("0.5")).to_integral_value("ROUND_FLOOR"))


SOLVED = [  # (printed, field): what the figure says of the field, worked out below by brute force
    ("124M", "vocab_size"), ("117M", "vocab_size"), ("1M", "vocab_size"), ("124439808", "vocab_size"),
    ("124439809", "vocab_size"), ("124.44M", "max_positions"), ("130M", "max_positions"), ("10M", "max_positions"),
]  # fmt: skip


# a brute-force search over 400,000 values each: two in the fast set (a range, and none fits), all in CI
@pytest.mark.parametrize("printed, field", fast_only(SOLVED, {"124M-vocab_size", "1M-vocab_size"},
                                                     ids=[f"{p}-{f}" for p, f in SOLVED]))  # fmt: skip
def test_solve_for_gives_every_value_that_fits_or_says_none_does(tmp_path, printed, field):
    path = write(tmp_path, "c.toml", FAMILY + CLAIM.replace("124M", printed) + f"solve_for = '{field}'\n")
    (obj,) = answered("validate", path, codes=(0, 1))
    implied = obj["claims"][0]["implied"]
    claimed, unit = (Decimal(printed.replace("M", "e6")), Decimal(1) if "M" not in printed else None)
    if unit is None:
        digits = printed[:-1]
        unit = Decimal(10) ** (6 - (len(digits.split(".")[1]) if "." in digits else 0))
        if "." not in digits:
            unit *= 10 ** (len(digits) - len(digits.rstrip("0")))
    spec = ModelSpec(name="my-gpt", vocab_size=50257, max_positions=1024, decoder_layers=12, d_model=768, n_heads=12)
    per = 768  # one more row of the token or the position table: d_model parameters
    rest = MY_GPT_TOTAL - per * getattr(spec, field)
    fits = [x for x in range(1, 400_000) if claimed - unit / 2 <= rest + per * x < claimed + unit / 2]
    if fits:
        assert (implied["low"], implied["high"]) == (fits[0], fits[-1]) and "note" not in implied
    else:
        assert implied["low"] is None and implied["high"] is None
        assert implied["note"].startswith(f"no value of {field} reproduces the figure")
        text = renders("validate", path, codes=(0, 1))
        assert f"no value of {field} reproduces the figure" in text and "between" not in text


def test_solve_for_says_no_value_reproduces_an_impossible_figure(tmp_path):
    path = write(tmp_path, "c.toml", FAMILY + CLAIM.replace("124M", "1M") + "solve_for = 'vocab_size'\n")
    code, out, err = cli("validate", path)
    assert code == 1 and err == ""
    assert "no value of vocab_size reproduces the figure" in out and "between -" not in out
    (obj,) = answered("validate", path, codes=(1,))
    implied = obj["claims"][0]["implied"]
    assert implied["low"] is None and implied["high"] is None
    # independently: the count at vocab_size = 1 is already above 1.5M, the top of what rounds to 1M
    assert count_params(GPT2.replace(vocab_size=1)).total > 1_500_000


def test_solve_for_a_possible_figure_gives_the_exact_range(tmp_path):
    path = write(tmp_path, "c.toml", FAMILY + CLAIM.replace("124M", "117M") + "solve_for = 'vocab_size'\n")
    (obj,) = answered("validate", path, codes=(1,))
    implied = obj["claims"][0]["implied"]
    rest = GPT2_TOTAL - 50257 * 768
    inside = [V for V in range(30_000, 45_000) if 116_500_000 <= rest + V * 768 < 117_500_000]
    assert (implied["low"], implied["high"]) == (inside[0], inside[-1])


@pytest.mark.parametrize(
    "claim",
    [
        CLAIM.replace("124M", "1e400"),
        CLAIM.replace("124M", "1e-400"),
        CLAIM.replace("124M", "0.000000000000000000000000000000000000001"),
        CLAIM.replace("124M", "123,456,789,012,345,678,901,234,567,890,123,456,789"),
        CLAIM.replace("124M", "5e-324") + "precision = 5e-324\n",
        COMPUTE + "method = 'hardware'\ngpus = 8\nhours = 1e308\ntflops = 1e308\n",
        COMPUTE + f"method = 'hardware'\ngpus = {MAX_INTEGER}\nhours = 1\ntflops = 1\n",
        COMPUTE + "method = '6nd'\ntokens = 1e300\n",
        COMPUTE.replace("training_flops", "pf_days") + "method = '6nd'\ntokens = 1e300\n",
        COMPUTE.replace("training_flops", "pf_days") + "method = '6nd'\ntokens = 1e9\nusing_params = '1e300'\n",
        COMPUTE + "method = 'exact'\ntokens = '300e9'\nseq_len = 1024\n",
    ],
    ids=["1e400", "1e-400", "tiny", "long", "tiny-precision", "huge-hardware", "max-gpus", "huge-tokens",
         "huge-pf-days", "huge-using-params", "tokens-as-text"],
)  # fmt: skip
def test_an_extreme_claim_is_assessed_exactly(tmp_path, claim):
    path = write(tmp_path, "c.toml", FAMILY + claim)
    (obj,) = answered("validate", path, codes=(0, 1))
    c = obj["claims"][0]
    assert c["status"] in ("match", "near", "off") and isinstance(c["deviation"], (int, float))
    renders("validate", path, codes=(0, 1))


# ---------------------------------------------------------------- the Python API


API_TYPE_ERRORS = [
    (
        lambda: count_params("gpt2"),
        "count_params: spec must be a ModelSpec, got str 'gpt2'; use archspec.preset('gpt2')",
    ),
    (lambda: count_params(None), "count_params: spec must be a ModelSpec, got NoneType"),
    (lambda: count_params({"name": "x"}), "count_params: spec must be a ModelSpec, got dict"),
    (lambda: count_flops("gpt2"), "count_flops: spec must be a ModelSpec"),
    (lambda: count_flops(GPT2, seq_len="1024"), "count_flops: seq_len must be an int or None, got str '1024'"),
    (lambda: count_flops(GPT2, batch=2.0), "count_flops: batch must be an int, got float 2.0"),
    (lambda: count_flops(GPT2, batch=True), "count_flops: batch must be an int, got bool"),
    (lambda: count_flops(GPT2, batch=None), "count_flops: batch must be an int"),
    (lambda: count_flops(GPT2, 1, 8.0), "seq_len must be an int or None, got float 8.0"),
    (lambda: count_flops(T_BASE, 1, 8, "8"), "src_len must be an int or None"),
    (lambda: count_flops(GPT2, causal_half="yes"), "causal_half must be True or False"),
    (lambda: count_flops(GPT2, causal_half=1), "causal_half must be True or False"),
    (lambda: training_cost("flops", 10), "training_cost: flops must be a FlopCount"),
    (lambda: training_cost(count_flops(GPT2), 1.5), "training_cost: tokens must be an int"),
    (lambda: training_cost(count_flops(GPT2), "1e9"), "tokens must be an int"),
    (lambda: training_cost(count_flops(GPT2), 10, gpus=1, peak_flops="1e15", mfu=0.5), "peak_flops must be a number"),
    (lambda: estimate_memory("gpt2"), "estimate_memory: spec must be a ModelSpec"),
    (lambda: estimate_memory(GPT2, batch=2.0), "estimate_memory: batch must be an int"),
    (lambda: estimate_memory(GPT2, dtype=None), "estimate_memory: dtype must be a str"),
    (lambda: estimate_memory(GPT2, optimizer=2), "optimizer must be a str"),
    (lambda: estimate_memory(GPT2, zero_stage=1.0), "zero_stage must be an int"),
    (lambda: estimate_memory(GPT2, tensor_parallel="2"), "tensor_parallel must be an int"),
    (lambda: estimate_memory(GPT2, dropout="no"), "dropout must be True or False"),
    (lambda: weights_bytes("gpt2"), "weights_bytes: spec must be a ModelSpec"),
    (lambda: weights_bytes(GPT2, dtype=2), "weights_bytes: dtype must be a str"),
    (lambda: kv_cache_bytes(GPT2, 1.0, 8), "kv_cache_bytes: batch must be an int"),
    (lambda: archspec.preset(None), "preset: name must be a str, got NoneType None"),
    (lambda: archspec.preset(123), "preset: name must be a str, got int 123"),
    (lambda: archspec.preset(["gpt2"]), "preset: name must be a str"),
    (lambda: archspec.get_preset(None), "get_preset: name must be a str"),
    (lambda: archspec.resolve_model(None), "resolve_model: ref must be a str"),
    (lambda: accelerator(None), "accelerator: name must be a str"),
    (lambda: load_spec(None), "expected a path"),
    (lambda: load_spec(123), "expected a path"),
    (lambda: parse_number(5), "expected text"),
]


@pytest.mark.parametrize("call, message", API_TYPE_ERRORS, ids=[m[:40] for _, m in API_TYPE_ERRORS])
def test_a_wrong_argument_type_is_a_type_error_naming_it(call, message):
    with pytest.raises(TypeError) as info:
        call()
    assert message in str(info.value)


def _np_int():
    np = pytest.importorskip("numpy")
    return np.int64(2)


API_VALUE_ERRORS = [
    (lambda: count_flops(GPT2, batch=0), "count_flops: batch must be at least 1, got 0"),
    (lambda: count_flops(GPT2, batch=-3), "batch must be at least 1"),
    (lambda: count_flops(GPT2, seq_len=0), "seq_len must be at least 1"),
    (lambda: count_flops(GPT2, seq_len=2**2000), "seq_len: integer too large"),
    (lambda: count_flops(GPT2, seq_len=1025), "longer than the learned position table"),
    (lambda: count_flops(BERT, causal_half=True), "bert-base is encoder-only; causal_half"),
    (lambda: count_flops(BERT, src_len=8), "bert-base is encoder-only"),
    (lambda: count_flops(GPT2, src_len=8), "gpt2 is decoder-only, it has no encoder"),
    (lambda: training_cost(count_flops(GPT2), 0), "tokens must be at least 1"),
    (lambda: training_cost(count_flops(GPT2), 10, gpus=1, peak_flops=float("inf"), mfu=0.5), "finite number"),
    (lambda: training_cost(count_flops(GPT2), 10, gpus=1, peak_flops=1e15, mfu=float("nan")), "finite number"),
    (lambda: training_cost(count_flops(GPT2), 10, gpus=1, peak_flops=1e15, mfu=2.0), "mfu must be in (0, 1]"),
    (lambda: training_cost(count_flops(GPT2), 10, gpus=1, peak_flops=0, mfu=0.5), "peak_flops must be greater"),
    (lambda: training_cost(count_flops(GPT2), 10, gpus=0, peak_flops=1e15, mfu=0.5), "gpus must be at least 1"),
    (lambda: estimate_memory(GPT2, zero_stage=4), "zero_stage must be 0, 1, 2 or 3"),
    (lambda: estimate_memory(GPT2, data_parallel=0), "data_parallel must be at least 1"),
    (lambda: estimate_memory(GPT2, dtype="fp7"), "unknown dtype 'fp7'"),
    (lambda: accelerator("x" * 100_000), "unknown accelerator 'xxx"),
    (lambda: archspec.preset(""), "unknown preset ''"),
    (lambda: archspec.preset("x" * 100_000), "unknown preset 'xxx"),
    (lambda: archspec.resolve_model("x" * 300), "unknown preset 'xxx"),
    (lambda: archspec.resolve_model("x" * 300 + ".toml"), "file name too long"),
    (lambda: load_spec("a\0b.toml"), "cannot read"),
    (lambda: load_spec("/dev/zero"), "is a character device"),
]


@pytest.mark.parametrize("call, message", API_VALUE_ERRORS, ids=[m[:40] for _, m in API_VALUE_ERRORS])
def test_a_bad_argument_value_is_a_value_error_naming_it(call, message):
    with pytest.raises(ValueError) as info:  # SpecError and pydantic's ValidationError are ValueErrors
        call()
    text = str(info.value)
    assert message in text and len(text) < 1100


def test_a_numpy_integer_is_refused_rather_than_allowed_to_wrap_around():
    with pytest.raises(TypeError, match="convert it with int"):
        count_flops(GPT2, batch=_np_int())


# derived fields (d_head, d_value, n_kv_heads, d_ff, final_norm, ...) whose inputs are the bad field
ONE_BAD_FIELD = [("d_model", "abc"), ("d_model", 0), ("n_heads", "x"), ("n_heads", -1), ("norm", "batchnorm"),
                 ("norm_position", 3), ("encoder_layers", "many"), ("tie_embeddings", "no"),
                 ("d_model", 2.5)]  # fmt: skip


@pytest.mark.parametrize("field, value", ONE_BAD_FIELD, ids=[f"{f}={v!r}" for f, v in ONE_BAD_FIELD])
def test_one_bad_field_is_one_error_naming_it(field, value):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        ModelSpec(**{**SPEC, field: value})
    assert [e["loc"] for e in info.value.errors()] == [(field,)], str(info.value)
    assert info.value.error_count() == 1 and str(info.value).startswith("1 validation error for ModelSpec")


def test_two_bad_fields_are_two_errors():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        ModelSpec(**{**SPEC, "d_model": -1, "n_heads": 0})
    assert sorted(e["loc"] for e in info.value.errors()) == [("d_model",), ("n_heads",)]


@pytest.mark.parametrize(
    "changes, message",
    [({"n_heads": 7}, "d_model=768 is not divisible by n_heads=7"), ({"d_model": "wide"}, "d_model: Input should be"),
     ({"colour": 1}, "unknown field 'colour'"), ({"mlp.top_k": 2}, "mlp.top_k"), ({"n_kv_heads": 5}, "n_kv_heads=5")],
    ids=["n_heads=7", "d_model=wide", "colour", "mlp.top_k", "n_kv_heads=5"],
)  # fmt: skip
def test_replace_raises_specerror_on_one_line(changes, message):
    with pytest.raises(archspec.SpecError) as info:
        GPT2.replace(**changes)
    text = str(info.value)
    assert message in text and "\n" not in text and "validation error" not in text
    assert "default factory" not in text


def test_a_validation_error_never_repeats_a_huge_value():
    from pydantic import ValidationError

    from archspec.spec.model import describe_spec_error as describe_validation_error

    with pytest.raises(ValidationError) as info:
        ModelSpec(**{**SPEC, "name": "N" * 50_000_000})
    assert len(describe_validation_error(info.value)) < 400
    with pytest.raises(ValidationError) as info:
        ModelSpec(**{**SPEC, "position": list(range(10**6))})
    assert len(describe_validation_error(info.value)) < 400
    with pytest.raises(ValidationError) as info:
        ModelSpec(**{**SPEC, "norm": 10**5000})
    message = describe_validation_error(info.value)
    assert "an integer of 5,001 digits" in message and len(message) < 400


# ---------------------------------------------------------------- exact numbers and their rendering


PARSED = [
    ("1e19", 10**19),
    ("300e9", 300 * 10**9),
    ("1.5e3", 1500),
    ("2.0", 2),
    ("50_257", 50257),
    ("-0", 0),
    ("+5", 5),
    ("0.4", 0.4),
    ("1e-320", 1e-320),
    ("1.5e308", 15 * 10**307),
    (str(MAX_INTEGER), MAX_INTEGER),
    ("4097.0000000000001", 4097.0000000000001),  # a float when any number will do; refused where an int is needed
    ("." + "0" * 20 + "1e21", 1),
]


@pytest.mark.parametrize("text, value", PARSED, ids=[t[:20] for t, _ in PARSED])
def test_parse_number_is_exact(text, value):
    got = parse_number(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    "text",
    ["4097.0000000000001", "1.5", "1e-3", "2.5e0"],
)
def test_parse_number_never_rounds_to_a_whole_number(text):
    with pytest.raises(SpecError, match="is not a whole number"):
        parse_number(text, "--batch", integer=True)


@pytest.mark.parametrize(
    "n", [10**400, 2**1024 + 1, 3 * 10**2000 + 7, 99_950 * 10**12, 10**15, 123_456_789 * 10**300, -(10**350)]
)
def test_sci_rounds_exact_integers_of_any_size_as_decimal_does(n):
    from archspec.render.text import human, human_bytes, sci

    assert sci(n) == f"{Decimal(n):.2e}".replace("E", "e")
    assert human(n) == sci(n)
    assert human_bytes(abs(n)).endswith(" B") and "e+" in human_bytes(abs(n)) or abs(n) < 1024**9


def test_json_output_refuses_a_non_finite_number():
    from archspec.render.text import to_json

    with pytest.raises(ValueError):
        to_json([{"name": "x", "value": float("inf")}])


# ---------------------------------------------------------------- property-based fuzzing


# CI runs a fixed sample of 60 examples, the fast set (-m "not slow", tests/conftest.py) its first 15;
# ARCHSPEC_FUZZ_EXAMPLES=5000 searches further with fresh randomness.
_DEEP_FUZZ = int(os.environ.get("ARCHSPEC_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_DEEP_FUZZ or (15 if os.environ.get("ARCHSPEC_FAST_SET") else 60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=not _DEEP_FUZZ,
    database=None,
)

numbers_as_text = st.one_of(
    st.integers(-(10**5), 10**320).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.decimals(allow_nan=True, allow_infinity=True).map(str),
    st.from_regex(r"\A[+-]?[0-9_]{0,6}(\.[0-9_]{0,6})?([eE][+-]?[0-9]{1,5})?\Z"),
    st.text(alphabet="0123456789.eE+-_nafiINF ", max_size=12),
    st.text(max_size=20),
)


def _expected_number(text: str, integer: bool):
    """What a numeric option should read, by Python's own float syntax (PEP 515 underscores, ASCII
    digits) and Decimal's exact value; None when it should be refused by a limit or as not a number."""
    s = text.strip()
    if not s or len(s) > 1000 or not s.isascii() or any(c.isalpha() and c not in "eE" for c in s):
        return None
    try:
        float(s)  # the syntax
    except ValueError:
        return None
    mantissa, _, exponent = s.lower().partition("e")
    if exponent and abs(int(exponent.replace("_", ""))) > 400:
        return None
    value = Decimal(s.replace("_", ""))
    if value == value.to_integral_value():
        if value.adjusted() > 400:
            return None
        n = int(value)
        return n if n.bit_length() <= 1024 else None
    if integer or float(value) == 0.0 or not math.isfinite(float(value)):
        return None
    return float(value)


@pytest.mark.slow  # sixty drawn numbers through three commands; test_a_bad_option_is_one_line_naming_it is fast
@FUZZ
@given(option=st.sampled_from(["--batch", "--seq-len", "--tokens"]), text=numbers_as_text)
@example(option="--tokens", text="1e19")
@example(option="--batch", text="4097.0000000000001")
@example(option="--seq-len", text="._")
def test_fuzz_integer_options_are_exact_or_one_line(option, text):
    code, out, err = cli("flops", "transformer-base", "--tokens", "1e9", f"{option}={text}", "--format", "json")
    expected = _expected_number(text, integer=True)
    if code == 0:
        (obj,) = strict_json(out)
        key = {"--batch": "batch", "--seq-len": "seq_len", "--tokens": "tokens"}[option]
        assert obj[key] == expected and expected >= 1
    else:
        assert_one_line_error(code, out, err)
        assert expected is None or expected < 1, f"{text!r} means {expected} and was refused"


@FUZZ
@given(option=st.sampled_from(["--peak-tflops", "--mfu", "--gpus"]), text=numbers_as_text)
@example(option="--peak-tflops", text="1e400")
@example(option="--peak-tflops", text="5e-324")
@example(option="--mfu", text="nan")
def test_fuzz_hardware_options_give_finite_json_or_one_line(option, text):
    base = ["flops", "gpt2", "--tokens", "1e9", "--peak-tflops", "100"]
    code, out, err = cli(*base, f"{option}={text}", "--format", "json")
    if code == 0:
        (obj,) = strict_json(out)
        assert obj["time_seconds"] > 0
        expected = _expected_number(text, integer=option == "--gpus")
        if option == "--gpus":
            assert obj["gpus"] == expected
        elif option == "--mfu":
            assert obj["mfu"] == expected
        else:  # the peak in FLOP/s: exact for an integer, the float product otherwise
            assert obj["peak_flops"] == (expected * 10**12 if isinstance(expected, int) else expected * 1e12)
    else:
        assert_one_line_error(code, out, err)


set_text = st.one_of(numbers_as_text, st.sampled_from(["true", "false", "rotary", "rmsnorm", "swiglu", "none"]))


@FUZZ
@given(field=st.sampled_from(FIELDS + ["colour", "", "d_modle"]), text=set_text)
@example(field="d_model", text="._")
@example(field="vocab_size", text="1e19")
@example(field="d_model", text="4097.0000000000001")
def test_fuzz_set_values_are_exact_and_validated_or_one_line(field, text):
    code, out, err = cli("params", "gpt2", "--set", f"{field}={text}", "--format", "json")
    if code == 0:
        (obj,) = strict_json(out)
        kind = ModelSpec.model_fields[field].annotation
        if kind is int:
            value = _expected_number(text, integer=True)
        elif kind is bool or (bool in typing.get_args(kind) and text.strip().lower() in ("true", "false")):
            value = text.strip().lower() == "true"
        else:
            value = text.strip()
        assert obj["total"] == count_params(GPT2.replace(**{field: value})).total
    else:
        assert_one_line_error(code, out, err)


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**5), 10**5),
        st.integers(0, 2000).map(lambda k: 10**k),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.sampled_from(["learned", "rotary", "rmsnorm", "swiglu", "mine", "post"]),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def spec_data(draw) -> dict:
    data = dict(SPEC)
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(FIELDS + ["colour", "Name", ""]))
        data[key] = draw(json_values | st.integers(1, 10**400))
    for key in draw(st.lists(st.sampled_from(list(SPEC)), max_size=2)):
        data.pop(key, None)
    return data


def _dump(data: dict, suffix: str) -> str:
    if suffix == ".json":
        return json.dumps(data)
    yaml = pytest.importorskip("yaml")
    return yaml.safe_dump(data)


def _reader_refuses(value, depth: int = 0) -> bool:
    """What the file reader refuses by its limits, whatever the spec thinks of it."""
    if depth > MAX_DEPTH:
        return True
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() > 1024
    if isinstance(value, list):
        return any(_reader_refuses(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_reader_refuses(v, depth + 1) for v in value.values())
    return False


@FUZZ
@given(data=spec_data(), suffix=st.sampled_from([".json", ".yaml"]))
def test_fuzz_spec_files_are_counted_exactly_or_refused_in_one_line(tmp_path_factory, data, suffix):
    from pydantic import ValidationError

    path = tmp_path_factory.mktemp("fuzz") / f"spec{suffix}"
    text = _dump(data, suffix)
    if len(text.encode()) > MAX_FILE_BYTES:
        return
    path.write_text(text, encoding="utf-8")
    code, out, err = cli("params", str(path), "--format", "json")
    try:
        expected = count_params(ModelSpec.model_validate(data)).total
    except (ValidationError, ValueError, TypeError):
        expected = None
    if code == 0:
        (obj,) = strict_json(out)
        assert obj["total"] == expected
    else:
        assert_one_line_error(code, out, err)
        assert expected is None or _reader_refuses(data), "the reader refused a valid spec"


@FUZZ
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=200) | st.binary(max_size=200))
@example(text="a = " + "[" * 5000)
@example(text=b"\xff\xfe{")
def test_fuzz_any_bytes_as_a_spec_file_are_one_line_or_a_count(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("bytes")
    for suffix in (".toml", ".json", ".yaml"):
        path = folder / f"x{suffix}"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        code, out, err = cli("params", str(path), "--format", "json")
        if code == 0:
            (obj,) = strict_json(out)
            assert obj["total"] == count_params(load_spec(path)).total
        else:
            assert_one_line_error(code, out, err)


@FUZZ
@given(printed=st.text(max_size=20) | numbers_as_text, precision=st.floats() | st.none())
@example(printed="nan", precision=None)
@example(printed="124M", precision=float("inf"))
def test_fuzz_claims_are_assessed_or_one_line(tmp_path_factory, printed, precision):
    claim = f'[[models.my-gpt.claims]]\nquantity = "params"\nprinted = {json.dumps(printed)}\nsource = "x"\n'
    if precision is not None:
        claim += f"precision = {precision!r}\n"
    path = tmp_path_factory.mktemp("claims") / "c.toml"
    path.write_text(FAMILY + claim, encoding="utf-8")
    code, out, err = cli("validate", str(path), "--format", "json")
    if code in (0, 1):
        (obj,) = strict_json(out)
        (c,) = obj["claims"]
        assert c["computed"] == MY_GPT_TOTAL and c["status"] in ("match", "near", "off")
        assert (code == 1) == (c["status"] == "off")
    else:
        assert_one_line_error(code, out, err)


# ---------------------------------------------------------------- one real process


def test_a_real_process_prints_one_line_and_exits_2_for_a_device_and_a_deep_file(tmp_path):
    import subprocess
    import sys

    models = [write(tmp_path, "deep.json", "[" * DEEP + "]" * DEEP)]
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.json").symlink_to("/dev/zero")
        models.append(str(tmp_path / "zero.json"))
    for model in models:
        done = subprocess.run(
            [sys.executable, "-m", "archspec", "params", model], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_the_spec_format_page_states_the_limits_the_code_enforces():
    from pathlib import Path

    from archspec.core import limits

    page = (Path(__file__).resolve().parent.parent / "docs" / "spec-format.md").read_text(encoding="utf-8")
    section = page.split("## Limits on input", 1)[1].split("\n## ", 1)[0]
    assert f"{limits.MAX_FILE_BYTES:,} bytes" in section and "1 MiB" in section
    assert f"{limits.MAX_DEPTH} levels" in section
    assert f"{limits.MAX_YAML_NODES:,} values" in section
    assert f"2\\*\\*{limits.MAX_INTEGER_BITS} − 1" in section and limits.MAX_INTEGER == 2**limits.MAX_INTEGER_BITS - 1
    assert f"±{limits.MAX_EXPONENT}" in section
    assert f"{limits.MAX_NUMBER_CHARS:,} characters" in section
    assert f"{limits.MAX_KINDS:,} distinct `[kinds]`" in section


# ---------------------------------------------------------------- standard output that cannot be written


WRITERS = [["list"], ["schema"], ["params", "gpt2"], ["compare", "gpt2", "--format", "json"], ["--help"],
           ["list", "--help"], ["--version"], ["validate", "gpt2"],
           ["import", "{hf}/bert-base-uncased.json"]]  # fmt: skip


def _argv(argv: list[str], tmp="") -> list[str]:
    from pathlib import Path

    hf = str(Path(__file__).resolve().parent / "data" / "hf")
    return [a.format(hf=hf, tmp=tmp) for a in argv]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [pytest.param(a, id=" ".join(a), marks=() if a in WRITERS[:2] else pytest.mark.slow)
                                  for a in WRITERS])  # fmt: skip
def test_a_full_disk_on_stdout_is_one_line_and_a_failure(argv):
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "archspec", *_argv(argv)], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60, env={**os.environ, "PYTHONUNBUFFERED": ""})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == "archspec: error: cannot write the output: [Errno 28] No space left on device\n"


@pytest.mark.parametrize("argv", WRITERS[:4], ids=[" ".join(a) for a in WRITERS[:4]])
def test_a_closed_pipe_on_stdout_ends_quietly(argv):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "archspec", *_argv(argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    proc.stdout.close()  # the reader went away before anything was written (`archspec list | head -0`)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and err == ""


# ---------------------------------------------------------------- every option of every command does something

# For each command: a base invocation, and for each of its options (by dest) the arguments that give it
# a value other than its default, with the context it needs. Every option must change the output, or
# be refused by name where it could not; the table must cover every option the parser has.
TINY = ["--set", "decoder_layers=1", "--set", "d_model=64", "--set", "n_heads=4", "--set", "vocab_size=100",
        "--set", "max_positions=16"]  # fmt: skip
GPU = ["--tokens", "1e9", "--gpu", "h100"]
MOE = ["--set", "mlp.kind=moe", "--set", "mlp.experts=4", "--set", "mlp.top_k=1", "--set", "mlp.d_expert=64"]
OPTION_CASES: dict[str, tuple[list[str], dict[str, list[tuple[list[str], list[str]]]]]] = {
    "list": ([], {"format": [(["--format", "csv"], [])]}),
    "show": (["gpt2"], {"format": [(["--format", "csv"], [])], "overrides": [(["--set", "n_kv_heads=4"], [])]}),
    "params": (["gpt2"], {"format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
                          "mtp": [(["--mtp"], ["--set", "mtp.modules=1"])]}),
    "compare": (["gpt2"], {"format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
                           "seq_len": [(["--seq-len", "64"], [])], "dtype": [(["--dtype", "fp32"], [])]}),
    "flops": (["gpt2"], {
        "format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
        "batch": [(["--batch", "2"], []), (["-b", "2"], [])],
        "seq_len": [(["--seq-len", "64"], []), (["-s", "64"], [])],
        "src_len": [(["--src-len", "8"], ["--set", "encoder_layers=1"])],
        "tokens": [(["--tokens", "1e9"], []), (["-D", "1e9"], [])], "causal_half": [(["--causal-half"], [])],
        "gpu": [(["--gpu", "h100"], ["--tokens", "1e9"])], "gpus": [(["--gpus", "8"], GPU)],
        "peak_tflops": [(["--peak-tflops", "100"], ["--tokens", "1e9"])], "mfu": [(["--mfu", "0.5"], GPU)],
        "dtype": [(["--dtype", "fp32"], GPU)], "price_per_hour": [(["--price-per-hour", "2.5"], GPU)]}),
    "memory": (["gpt2"], {
        "format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
        "batch": [(["--batch", "2"], [])], "seq_len": [(["--seq-len", "64"], [])],
        "src_len": [(["--src-len", "8"], ["--set", "encoder_layers=1"])],
        "dtype": [(["--dtype", "fp32"], [])], "optimizer": [(["--optimizer", "sgd"], [])],
        "recompute": [(["--recompute", "full"], [])], "fp32_grads": [(["--fp32-grads"], [])],
        "attention": [(["--attention", "eager"], [])], "dropout": [(["--dropout"], [])],
"zero": [(["--zero", "1"], ["--gpus", "2"])],
        "gpus": [(["--gpus", "2"], [])], "tp": [(["--tp", "2"], ["--gpus", "2"])],
        "pp": [(["--pp", "2"], ["--gpus", "2"])], "gpu": [(["--gpu", "h100"], [])],
        "weights": [(["--weights", "int8"], [])], "experts": [(["--experts", "int4"], MOE)],
        "engine": [(["--engine", "sglang"], ["--gpu", "h100"])],
        "gpu_memory_utilization": [(["--gpu-memory-utilization", "0.5"], ["--gpu", "h100"])],
        "max_batched_tokens": [(["--max-batched-tokens", "64K"], ["--gpu", "h100"])],
        "context_reserve": [(["--context-reserve", "1"], ["--gpu", "h100"])],
        "kv_dtype": [(["--kv-dtype", "fp8"], [])], "lora": [(["--lora", "8"], [])],
        "lora_targets": [(["--lora-targets", "q,v"], ["--lora", "8"])], "micro_batch": [(["--micro-batch", "2"], [])],
        "global_batch": [(["--global-batch", "8"], ["--micro-batch", "2"])],
        "max_micro_batch": [(["--max-micro-batch"], ["--gpu", "h100"])],
        "offload": [(["--offload", "optimizer"], [])]}),
    "validate": (["gpt2"], {"format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])]}),
    "formula": (["gpt2"], {"format": [(["--format", "json"], [])], "overrides": [(["--set", "vocab_size=100"], [])]}),
    "sweep": (["gpt2", "--vary", "n_heads=12"], {
        "format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
        "vary": [(["--vary", "d_ff=1024"], [])], "seq_len": [(["--seq-len", "64"], [])],
        "dtype": [(["--dtype", "fp32"], [])]}),
    "inference": (["gpt2", "--gpu", "h100", "--prompt-len", "16", "--gen-len", "16"], {
        "format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
        "gpu": [(["--gpu", "a100"], [])], "batch": [(["--batch", "2"], [])],
        "prompt_len": [(["--prompt-len", "32"], []), (["-p", "32"], [])],
        "gen_len": [(["--gen-len", "32"], []), (["-g", "32"], [])], "dtype": [(["--dtype", "fp32"], [])],
        "kv_dtype": [(["--kv-dtype", "fp8"], [])], "mfu": [(["--mfu", "0.5"], [])], "mbu": [(["--mbu", "0.5"], [])],
        "tp": [(["--tp", "2"], [])], "pp": [(["--pp", "2"], [])], "ep": [(["--ep", "2"], MOE)],
        "weights": [(["--weights", "int8"], [])], "experts": [(["--experts", "int4"], MOE)],
        "engine": [(["--engine", "none"], [])], "gpu_memory_utilization": [(["--gpu-memory-utilization", "0.5"], [])],
        "max_batched_tokens": [(["--max-batched-tokens", "64K"], [])],
        "context_reserve": [(["--context-reserve", "1"], [])],
        "price_per_hour": [(["--price-per-hour", "2.5"], [])]}),
    "fit": (["gpt2", "--gpu", "h100"], {
        "format": [(["--format", "csv"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
        "gpu": [(["--gpu", "rtx4090"], [])], "task": [(["--task", "training"], [])],
        "seq_len": [(["--seq-len", "64"], [])], "batch": [(["--batch", "64"], ["--task", "training"])],
        "lora_rank": [(["--lora-rank", "1024"], ["--task", "lora", "--seq-len", "64"])],
        "lora_targets": [(["--lora-targets", "attention"], ["--task", "lora"])],
        "weights": [(["--weights", "int8"], [])], "engine": [(["--engine", "none"], [])],
        "gpu_memory_utilization": [(["--gpu-memory-utilization", "0.5"], [])],
        "max_batched_tokens": [(["--max-batched-tokens", "64K"], ["--seq-len", "64"])],
        "context_reserve": [(["--context-reserve", "1"], [])],
        "recompute": [(["--recompute", "full"], ["--task", "training"])],
        "attention": [(["--attention", "eager"], ["--task", "training"])],
        "optimizer": [(["--optimizer", "sgd"], ["--task", "training"])],
        "fp32_grads": [(["--fp32-grads"], ["--task", "training"])],
        "dropout": [(["--dropout"], ["--task", "training"])],
        "offload": [(["--offload", "optimizer"], ["--task", "training"])],
        "price_per_hour": [(["--price-per-hour", "2.5"], [])]}),
    "hardware": ([], {"format": [(["--format", "csv"], [])], "gpu": [(["--gpu", "h100"], [])]}),
    "import": (["{hf}/bert-base-uncased.json"], {
        "format": [(["--format", "json"], [])], "overrides": [(["--set", "vocab_size=100"], [])],
        "output": [(["-o", "{tmp}/out.toml"], []), (["--output", "{tmp}/out.toml"], [])]}),
    "schema": ([], {"format": [(["--format", "table"], [])]}),
    "check": (["{hf}/../checkpoints/tiny-llama"], {"format": [(["--format", "csv"], [])]}),
    "verify": (["gpt2", *TINY], {
        "format": [(["--format", "csv"], [])], "overrides": [(["--set", "decoder_layers=2"], [])],
        "memory": [(["--memory"], [])], "recompute": [(["--recompute", "full"], ["--memory"])]}),
}  # fmt: skip
# measured with real processes in tests/test_distributed.py and with a picture in tests/test_plot.py
ELSEWHERE = {"verify": {"ranks", "zero", "tp"},
             # a page in a real browser: tests/test_report.py; lock-step and kept fields: tests/test_frontdoor.py
             "report": {"format", "overrides", "models", "output", "gpu", "batch", "seq_len"},
             # constraints, limits and output files of sweeps: tests/test_planning.py
             "sweep": {"keep", "zip", "where", "limit", "force", "output"},
             "plot": {"format", "overrides", "kind", "models", "output", "vary", "gpu", "batch", "dtype", "recompute",
                      "seq_len"}}  # fmt: skip


def _options(command: str) -> dict[str, set[str]]:
    """dest -> option strings of one command's parser (positionals under their dest)."""
    from archspec.cli import build_parser

    (sub,) = [a for a in build_parser(command)._actions if a.dest == "command"]
    out: dict[str, set[str]] = {}
    for a in sub.choices[command]._actions:
        if a.dest != "help":
            out.setdefault(a.dest, set()).update(a.option_strings)
    return out


def test_the_option_table_covers_every_option_of_every_command():
    from archspec.cli import COMMANDS

    for command in COMMANDS:
        options = {d for d, strings in _options(command).items() if strings}
        cases = set(OPTION_CASES.get(command, ([], {}))[1]) | ELSEWHERE.get(command, set())
        assert options <= cases, f"{command}: no case for {sorted(options - cases)}"


_OPTION_RUNS = [(c, d, i) for c, (_, cases) in OPTION_CASES.items() for d, cs in cases.items() for i in range(len(cs))]


# fit's runs plan many layouts each (a second or two): one stays in the fast set, every one runs in CI
_FAST_FIT = {("fit", "gpu", 0)}


@pytest.mark.parametrize(
    "command, dest, i",
    [pytest.param(*run, id="-".join(map(str, run)), marks=pytest.mark.slow if run[0] == "fit" and run not in _FAST_FIT
                  else ()) for run in _OPTION_RUNS],
)  # fmt: skip
def test_every_option_changes_the_output(tmp_path, command, dest, i):
    if command == "verify":
        pytest.importorskip("torch")
    base, cases = OPTION_CASES[command]
    given, context = cases[dest][i]
    fill = lambda argv: _argv(argv, tmp_path)  # noqa: E731
    fmt = [] if dest == "format" or command == "import" else ["--format", "json"]
    without = cli(command, *fill(base), *fill(context), *fmt)
    if given[0] in base:  # an option the base gives already (inference's --gpu): given instead, not twice
        at = base.index(given[0])
        base = base[:at] + base[at + 2 :]
    with_it = cli(command, *fill(base), *fill(context), *fill(given), *fmt)
    assert without[0] == 0 and with_it[0] in (0, 1), (without[2], with_it[2])
    if dest == "output":
        assert with_it[1] == "" and (tmp_path / "out.toml").read_text().strip() == without[1].strip()
        return
    assert with_it[1] != without[1], f"{command} {given} changed nothing"


REFUSED_ALONE = [
    (["verify", "gpt2", "--recompute", "full"], "--recompute changes nothing without --memory"),
    (["verify", "gpt2", "--zero", "1"], "--zero changes nothing without --ranks N"),
    (["verify", "gpt2", "--tp", "2"], "--tp changes nothing without --ranks N"),
    (["flops", "gpt2", "--mfu", "0.5"], "--mfu changes nothing without --gpu NAME or --peak-tflops N"),
    (["flops", "gpt2", "--tokens", "1e9", "--dtype", "fp16"], "--dtype changes nothing without --gpu NAME"),
    (["import", "{hf}/bert-base-uncased.json", "--format", "csv"], "invalid choice: 'csv' (choose from 'json')"),
    (["import", "{hf}/bert-base-uncased.json", "--format", "json", "-o", "{tmp}/x.yaml"], "the suffix of FILE"),
    (["plot", "breakdown", "gpt2", "-o", "{tmp}/b.svg", "--format", "markdown"], "--format markdown changes nothing"),
    (["fit", "gpt2", "--lora-rank", "8"], "--lora-rank changes nothing without --task lora"),
    (["fit", "gpt2", "--task", "inference", "--lora-targets", "q,v"], "--lora-targets changes nothing without --task"),
]


@pytest.mark.parametrize("argv, message", REFUSED_ALONE, ids=[" ".join(a[:1] + a[-2:]) for a, _ in REFUSED_ALONE])
def test_an_option_that_would_change_nothing_is_refused_by_name(tmp_path, argv, message):
    refused(*_argv(argv, tmp_path), message=message)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_an_option_of_another_command_is_refused_by_name_on_every_command():
    """commands x options: every option string some command has, given to a command that lacks it."""
    from archspec.cli import COMMANDS

    minimal = {c: base for c, (base, _) in OPTION_CASES.items()} | {
        "plot": ["breakdown", "gpt2", "-o", "x.svg"],
        "report": ["gpt2", "-o", "x.html"],
    }
    every = {s for c in COMMANDS for ss in _options(c).values() for s in ss if s.startswith("--")}
    checked = 0
    for command in COMMANDS:
        mine = {s for ss in _options(command).values() for s in ss}
        for option in sorted(every - mine):
            refused(command, *_argv(minimal[command]), f"{option}=1",
                    message=f"`archspec {command}` has no option {option}")  # fmt: skip
            checked += 1
    assert checked > 100  # --set on list and schema among them
    refused("list", "--set", "d_model=1", message="`archspec list` has no option --set")
    refused("schema", "--set", "d_model=1", message="`archspec schema` has no option --set")


# ---------------------------------------------------------------- sizes and caches torch cannot take


BEYOND_TORCH = [  # (changes to a small spec, the field or tensor the message names)
    ({"d_model": 2**64, "n_heads": 1}, "d_model = 18,446,744,073,709,551,616"),
    ({"d_model": 10**400, "n_heads": 1}, "d_model = about 10^400"),  # beyond a float, too
    ({"vocab_size": 2**70}, "vocab_size = 1,180,591,620,717,411,303,424"),
    ({"d_ff": 2**63}, "d_ff = 9,223,372,036,854,775,808"),
    ({"max_positions": 2**64}, "max_positions = 18,446,744,073,709,551,616"),
    ({"d_head": 2**63, "n_heads": 1}, "d_head ="),
    ({"position": "sinusoidal", "max_positions": 2**62}, "the sinusoidal table of max_positions x d_model"),
    ({"vocab_size": 2**55}, "a tensor of shape (36028797018963968, 64) has more bytes in float32"),
]


@pytest.mark.parametrize("changes, message", BEYOND_TORCH, ids=[" ".join(c) for c, _ in BEYOND_TORCH])
def test_a_size_torch_cannot_represent_is_a_specerror_before_any_memory_is_held(changes, message):
    pytest.importorskip("torch")
    from archspec.reference import build

    spec = ModelSpec(**{**SPEC, **changes})
    with pytest.raises(SpecError) as info:
        build(spec, device="meta")
    assert message in str(info.value) and "\n" not in str(info.value)
    assert count_params(spec).total > 0  # the count itself needs no torch and stays exact


def test_the_size_limit_is_torchs_own():
    """Just inside, the spec builds on the meta device; one step beyond, torch itself refuses the tensor."""
    torch = pytest.importorskip("torch")
    from archspec.reference import build

    inside = build(ModelSpec(**{**SPEC, "vocab_size": 2**54}), device="meta")
    assert inside.embed.weight.shape == (2**54, 64)
    with pytest.raises(RuntimeError, match="overflow"):
        torch.empty((2**55, 64), device="meta")


FOREIGN = [  # (the other model's changes, where the message points)
    ({"n_heads": 2}, "layer 0 self-attention 'k' has shape (1, 2, 5, 32), this model caches (*, 4, *, 16)"),
    ({"n_kv_heads": 1}, "layer 0 self-attention 'k' has shape (1, 1, 5, 16)"),
    ({"d_value": 8}, "layer 0 self-attention 'v' has shape (1, 4, 5, 8)"),
    ({"encoder_layers": 2}, "layer 0 cross-attention 'k' has shape (1, 4, 3, 16), this model caches nothing"),
]


@pytest.mark.parametrize("changes, message", FOREIGN, ids=[" ".join(c) for c, _ in FOREIGN])
def test_a_cache_made_by_another_model_is_a_specerror_naming_it(changes, message):
    torch = pytest.importorskip("torch")
    from archspec.reference import build

    mine, other = build(ModelSpec(**SPEC), seed=0), build(ModelSpec(**{**SPEC, **changes}), seed=0)
    tokens = torch.randint(0, 1000, (1, 5))
    cache = other.new_cache()
    other(tokens[:, :3], tokens, cache=cache) if changes.get("encoder_layers") else other(tokens, cache=cache)
    with pytest.raises(SpecError, match="the cache was made by another model") as info:
        mine(tokens[:, :1], cache=cache)
    assert message in str(info.value)
    own = mine.new_cache()  # and this model's own cache goes on as before
    mine(tokens, cache=own)
    assert mine(tokens[:, :1], cache=own).shape == (1, 1, 1000)


# ---------------------------------------------------------------- planning cost does not grow with depth


def _rank_elements_by_every_tensor(spec, shards: int, tp: int) -> int:
    """The oracle: every tensor of every layer by its full path, split as Megatron-LM and FSDP2 split it."""
    from archspec.describe.blocks import describe, tensors
    from archspec.memory import COLUMN_PARALLEL, ROW_PARALLEL

    total = 0
    for t in tensors(describe(spec)):
        shape = list(t.shape)
        *_, module, leaf = ("", *t.path.split("."))
        if tp > 1 and module in ROW_PARALLEL and leaf == "weight":
            shape[-1] = -(-shape[-1] // tp)
        elif tp > 1 and (module in COLUMN_PARALLEL or module in ("embed", "target_embed", "head")):
            shape[0] = -(-shape[0] // tp)
        shape[0] = -(-shape[0] // shards)
        total += math.prod(shape)
    return total


@pytest.mark.parametrize("name", ["gpt2", "transformer-base", "bert-base", "mixtral-8x7b", "deepseek-v3", "t5-base"])
def test_rank_elements_per_kind_equal_every_tensor_counted(name):
    from archspec.memory import rank_elements

    spec = archspec.preset(name)
    for shards, tp in ((1, 1), (8, 1), (3, 2), (64, 4)):
        assert rank_elements(spec, shards, tp) == _rank_elements_by_every_tensor(spec, shards, tp), (shards, tp)


def test_memory_planning_looks_at_each_tensor_once_whatever_the_depth(monkeypatch):
    """Counted, not timed: the tensors the planner enumerates are the same for 12 and 10^6 layers."""
    from archspec.describe import blocks

    seen = {"n": 0}
    original = blocks.Part.paths

    def counting(self):
        for path in original(self):
            seen["n"] += 1
            yield path

    monkeypatch.setattr(blocks.Part, "paths", counting)
    looked = []
    for layers in (12, 10**6):
        seen["n"] = 0
        spec = GPT2.replace(decoder_layers=layers)
        m = estimate_memory(spec, 1, 1024, zero_stage=3, data_parallel=8, tensor_parallel=4, pipeline_parallel=2)
        looked.append(seen["n"])
        assert m.weights_bytes > 0
    assert looked[0] == looked[1], looked


# ---------------------------------------------------------------- fuzzed Hugging Face configs

HF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hf")
HF_FILES = sorted(f for f in os.listdir(HF_DIR) if f.endswith(".json"))
HOSTILE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([2**63, 2**64 + 1, 10**30, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.lists(st.integers(0, 4), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(0, 4), max_size=2),
)  # fmt: skip


@st.composite
def mutated_config(draw) -> tuple[str, dict]:
    """A real config of the test set with a few keys deleted, set to hostile values, renamed or added."""
    name = draw(st.sampled_from(HF_FILES))
    with open(os.path.join(HF_DIR, name), encoding="utf-8") as f:
        data = json.load(f)
    target = data
    if isinstance(data.get("text_config"), dict) and draw(st.booleans()):
        target = data["text_config"]  # the text model of a wrapper
    for _ in range(draw(st.integers(1, 3))):
        keys = sorted(target) or ["model_type"]
        key = draw(st.sampled_from(keys))
        action = draw(st.sampled_from(["delete", "value", "rename", "add", "model_type"]))
        if action == "delete":
            target.pop(key, None)
        elif action == "value":
            target[key] = draw(HOSTILE_VALUES)
        elif action == "rename":
            target[key + draw(st.sampled_from(["_", "s", "X"]))] = target.pop(key, None)
        elif action == "add":
            target[draw(st.text(min_size=1, max_size=12))] = draw(HOSTILE_VALUES)
        else:
            data["model_type"] = draw(st.sampled_from(["llama", "gpt2", "t5", "bert", "mixtral", "deepseek_v3",
                                                        "gemma2", "qwen2", "falcon", "nonesuch", ""]))  # fmt: skip
    return name, data


@FUZZ
@given(case=mutated_config())
@example(case=("gpt2.json", {"model_type": "gpt2", "n_embd": float("nan")}))
@example(case=("llama-3-8b.json", {"model_type": "llama", "hidden_size": 2**64, "num_attention_heads": 1}))
def test_fuzz_real_configs_mutated_are_counted_or_refused_in_one_line(tmp_path_factory, case):
    name, data = case
    path = tmp_path_factory.mktemp("hf") / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN and Infinity as Python's json writes them
    code, out, err = cli("params", str(path), "--format", "json")
    if code == 0:
        (obj,) = strict_json(out)
        assert isinstance(obj["total"], int) and obj["total"] > 0 and sum(obj["components"].values()) == obj["total"]
        assert "Traceback" not in err
    else:
        assert_one_line_error(code, out, err)
