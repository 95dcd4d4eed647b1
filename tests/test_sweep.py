"""`archspec sweep` and archspec.sweep: rows equal the counters on the replaced spec, in product order."""

import itertools
import json
from fractions import Fraction

import pytest

import archspec
from archspec.core.errors import SpecError
from archspec.count.flops import count_flops
from archspec.plan.sweep import combinations, parse_vary, sweep


def test_sweep_row_equals_the_counts_of_the_replaced_spec():
    gpt2 = archspec.preset("gpt2")
    (row,) = sweep(gpt2, [parse_vary("d_model=1536")])
    wider = gpt2.replace(d_model=1536)
    assert row["total"] == archspec.count_params(wider).total
    assert row["active"] == archspec.count_params(wider).active
    f = count_flops(wider, 1, 1024)
    assert row["forward_per_token"] == Fraction(f.forward, 1024)
    # by hand: bf16 weights are 2 bytes a parameter; the cache holds K and V, 12 layers x 12 heads x 128 wide
    assert row["weights_bytes"] == 2 * row["total"]
    assert row["kv_cache_bytes_per_token"] == 12 * 2 * 12 * 128 * 2


def test_sweep_of_d_model_follows_the_gpt2_formula():
    # GPT-2's count by hand: per layer 12 d^2 + 13 d, plus V d + 1024 d positions and the final norm 2 d
    gpt2 = archspec.preset("gpt2")
    for row in sweep(gpt2, [parse_vary("d_model=384:1536:384")]):
        d = row["d_model"]
        assert row["total"] == 12 * (12 * d * d + 13 * d) + 50257 * d + 1024 * d + 2 * d


def test_rows_are_the_product_of_the_lists_last_field_fastest():
    varies = [parse_vary("d_model=512,768,1024"), parse_vary("n_heads=8,16")]
    rows = sweep(archspec.preset("gpt2"), varies)
    assert [(r["d_model"], r["n_heads"]) for r in rows] == list(itertools.product([512, 768, 1024], [8, 16]))


def test_range_includes_its_stop_and_defaults_to_step_one():
    assert tuple(parse_vary("d_model=512:4096:512").values) == tuple(range(512, 4097, 512))
    assert tuple(parse_vary("decoder_layers=2:5").values) == (2, 3, 4, 5)
    assert tuple(parse_vary("d_model=1e3:3e3:1_000").values) == (1000, 2000, 3000)


def test_list_values_keep_their_types():
    assert parse_vary("activation=gelu,swiglu").values == ("gelu", "swiglu")
    assert parse_vary("bias=true,false").values == (True, False)


def test_encoder_decoder_kv_per_token_counts_self_and_cross_attention():
    spec = archspec.preset("transformer-base")
    (row,) = sweep(spec, [parse_vary("decoder_layers=6")])
    # one target token's self-attention K, V plus one source token's cross-attention K, V, per decoder layer
    assert row["kv_cache_bytes_per_token"] == 2 * 6 * 8 * (64 + 64) * 2


def test_seq_len_sets_the_flops_context():
    gpt2 = archspec.preset("gpt2")
    (row,) = sweep(gpt2, [parse_vary("n_heads=12")], seq_len=256)
    assert row["seq_len"] == 256
    assert row["forward_per_token"] == Fraction(count_flops(gpt2, 1, 256).forward, 256)


def test_cli_json_rows_are_the_library_rows(run_json):
    out = run_json("sweep", "gpt2", "--vary", "d_model=512:1024:256", "--vary", "n_heads=8,16")
    lib = sweep(archspec.preset("gpt2"), [parse_vary("d_model=512:1024:256"), parse_vary("n_heads=8,16")])
    assert out == json.loads(json.dumps(list(lib)))
    assert all(list(o)[0] == "name" for o in out)
    assert all(isinstance(o["total"], int) for o in out)


def test_cli_every_format(run_cli):
    args = ("sweep", "gpt2", "--vary", "d_model=384,768")
    code, table, _ = run_cli(*args)
    assert code == 0 and "Counts rounded" in table and "124.4M" in table
    code, md, _ = run_cli(*args, "--format", "markdown")
    assert code == 0 and md.splitlines()[0].startswith("| model")
    code, csv_text, _ = run_cli(*args, "--format", "csv")
    header, *lines = csv_text.strip().splitlines()
    assert header.split(",")[:4] == ["name", "d_model", "total", "active"] and len(lines) == 2
    assert lines[1].split(",")[2] == str(archspec.count_params(archspec.preset("gpt2")).total)


def test_cli_set_applies_before_vary(run_json):
    (row,) = run_json("sweep", "gpt2", "--set", "vocab_size=50304", "--vary", "n_heads=12")
    assert row["total"] == archspec.count_params(archspec.preset("gpt2").replace(vocab_size=50304)).total


@pytest.mark.parametrize(
    "vary, words",
    [
        ("d_model", "expected FIELD="),
        ("d_model=", "no values"),
        ("d_model=512,,1024", "empty value"),
        ("d_modle=512", "did you mean 'd_model'"),
        ("=512", "field name is empty"),
        ("name=a,b", "cannot be varied"),
        ("d_model=4096:512:512", "empty range"),
        ("d_model=512:1024:0", "step must be positive"),
        ("d_model=512:1024:-256", "step must be positive"),
        ("d_model=1.5:3", "whole numbers"),
        ("d_model=a:b", "is not a number"),
        ("d_model=1:2:3:4", "START:STOP"),
        ("d_model=1:10000000", "over the limit"),
        ("d_model=1:1e20", "over the limit"),
    ],
)
def test_bad_vary_is_one_line_exit_2(run_cli, vary, words):
    code, out, err = run_cli("sweep", "gpt2", "--vary", vary)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err


def test_invalid_combination_names_the_combination(run_cli):
    # refused combinations are skipped, one line each, and the exit code says so (1)
    code, _, err = run_cli("sweep", "gpt2", "--vary", "d_model=768,1000")
    assert code == 1 and "skipped gpt2 with d_model=1000" in err and "not divisible by n_heads=12" in err
    assert len(err.strip().splitlines()) == 1


def test_vary_is_required_and_fields_are_given_once(run_cli):
    code, _, err = run_cli("sweep", "gpt2")
    assert code == 2 and "--vary" in err
    code, _, err = run_cli("sweep", "gpt2", "--vary", "d_model=512", "--vary", "d_model=768")
    assert code == 2 and "given twice" in err


def test_product_over_the_limit_is_refused_before_counting():
    big = [parse_vary("d_model=1:1000"), parse_vary("n_heads=1:100")]  # each list alone is within the limit
    with pytest.raises(SpecError, match="100,000 combinations, over the limit of 10,000"):
        sweep(archspec.preset("gpt2"), big, limit=10_000)
    assert next(combinations(big)) == {"d_model": 1, "n_heads": 1}  # a generator: nothing is enumerated ahead


def test_flops_context_beyond_the_position_table_is_exit_2(run_cli):
    code, _, err = run_cli("sweep", "gpt2", "--vary", "max_positions=512,1024", "--seq-len", "1024")
    assert code == 2 and "max_positions=512" in err and "longer than the learned position table" in err
