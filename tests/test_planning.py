"""Planning at scale: the fast path of `replace` and of the description gives what full validation and a
fresh description give; archspec.sweep streams rows, with constraints and limits; results as pandas
tables and notebook HTML."""

import csv
import io
import itertools
import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replacing import replaced_as_validated, validated_afresh

import archspec
import archspec.describe.blocks as blocks
from archspec.cli import main
from archspec.core.compiled import full_way
from archspec.core.errors import SpecError
from archspec.count.flops import count_flops
from archspec.memory import estimate_memory
from archspec.plan.sweep import Sweep, parse_vary, parse_where, sweep
from archspec.spec.model import ModelSpec, _plain_fields

PRESETS = archspec.presets()
PLAIN = sorted(_plain_fields(ModelSpec))


def figures(spec):
    """Parameters, FLOPs and memory of `spec`, each described afresh (the kind cache emptied first), the
    full way (no program of archspec.core.compiled answers)."""
    with full_way():
        blocks._BLOCKS.clear()
        p = archspec.count_params(spec)
        blocks._BLOCKS.clear()
        f = count_flops(spec, 2, min(spec.max_positions, 256))
        blocks._BLOCKS.clear()
        m = estimate_memory(spec, batch=2, seq_len=min(spec.max_positions, 256))
    return p, f, m


def value_for(spec, field, draw):
    v = getattr(spec, field)
    if isinstance(v, bool):
        return draw(st.booleans())
    if isinstance(v, int):
        return draw(st.sampled_from([v, 2 * v, max(v // 2, 1), v + 1, 1, 0, 64, 128, 4096]))
    if isinstance(v, float):
        return draw(st.sampled_from([v, 1e-6, 0.5, 2.0, 0.0]))
    return draw(st.sampled_from([v, "gelu", "swiglu", "relu", "rmsnorm", "layernorm", "pre", "post", "xavier"]))


@st.composite
def replacements(draw):
    spec = archspec.preset(draw(st.sampled_from(PRESETS)))
    fields = draw(st.lists(st.sampled_from(PLAIN), min_size=1, max_size=3, unique=True))
    return spec, {f: value_for(spec, f, draw) for f in fields}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(replacements())
def test_fast_replace_is_the_fully_validated_spec_with_the_same_counts(case):
    spec, changes = case
    replaced = replaced_as_validated(spec, changes)
    if replaced is None:  # both refuse
        return
    fast, fresh = replaced
    assert fast.model_dump() == fresh.model_dump()
    # the counts of the derived spec (kinds from the cache) equal those of the fresh one, described afresh
    p, f, m = archspec.count_params(fast), count_flops(fast, 2, min(fast.max_positions, 256)), estimate_memory(
        fast, batch=2, seq_len=min(fast.max_positions, 256))  # fmt: skip
    assert (p, f, m) == figures(fresh)


def test_replace_refuses_as_full_validation_does_with_one_message():
    gpt2 = archspec.preset("gpt2")
    with pytest.raises(SpecError, match="d_model=1000 is not divisible by n_heads=12"):
        gpt2.replace(d_model=1000)
    with pytest.raises(SpecError, match="d_model"):
        gpt2.replace(d_model=-5)
    with pytest.raises(SpecError, match="d_model"):
        gpt2.replace(d_model=True)  # strict: a bool is not a width


def test_derived_defaults_follow_a_replaced_field():
    gpt2 = archspec.preset("gpt2")
    wider = gpt2.replace(d_model=1536)
    assert (wider.d_head, wider.d_ff) == (128, 6144)  # d_model / n_heads and 4 d_model, derived again
    assert "d_head" not in wider.model_fields_set
    fixed = gpt2.replace(d_head=64).replace(d_model=1536)
    assert fixed.d_head == 64  # a given value is never rewritten


def test_kind_cache_is_bounded_and_keyed_by_shape_not_depth():
    blocks._BLOCKS.clear()
    gpt2 = archspec.preset("gpt2")
    with full_way():  # the description itself (a compiled program describes nothing)
        for layers in (2, 6, 12, 48):
            archspec.count_params(gpt2.replace(decoder_layers=layers))
        assert len(blocks._BLOCKS) == 1  # one layer kind: the depth is not part of its key
        archspec.count_params(gpt2.replace(d_model=1536))
        assert len(blocks._BLOCKS) == 2
    assert blocks._BLOCKS_MAX >= 1


# ---------------------------------------------------------------- the sweep API


def test_api_sweep_rows_equal_the_counters_and_stream():
    spec = archspec.preset("llama-3-8b")
    s = sweep(spec, {"d_model": range(3072, 4097, 512), "decoder_layers": [16, 32]})
    assert isinstance(s, Sweep) and s.n_combinations == 6
    rows = list(s)
    assert [(r["d_model"], r["decoder_layers"]) for r in rows] == list(itertools.product([3072, 3584, 4096], [16, 32]))
    for r in rows:
        shape = spec.replace(d_model=r["d_model"], decoder_layers=r["decoder_layers"])
        assert r["total"] == archspec.count_params(shape).total
        assert r["forward_per_token"] == count_flops(shape, 1, None).forward_per_token


def test_a_million_combinations_stream_without_being_made():
    s = sweep(archspec.preset("gpt2"), ["d_model=768:768000:768", "decoder_layers=1:1000"])
    assert s.n_combinations == 1_000_000
    first = list(itertools.islice(iter(s), 2))  # two rows made, not a million
    assert [r["d_model"] for r in first] == [768, 768] and [r["decoder_layers"] for r in first] == [1, 2]


def test_where_keeps_the_rows_that_satisfy_every_constraint():
    spec = archspec.preset("llama-3-8b")
    rows = list(sweep(spec, {"d_model": range(2048, 8193, 256), "decoder_layers": range(16, 49)},
                      where=["total within 1% of 7e9", "d_head == 128"]))  # fmt: skip
    assert rows
    for r in rows:
        assert abs(r["total"] - 7 * 10**9) * 100 <= 7 * 10**9
        assert spec.replace(d_model=r["d_model"]).d_head == 128
    every = list(sweep(spec, {"d_model": range(2048, 8193, 256), "decoder_layers": range(16, 49)}))
    kept = [r for r in every if abs(r["total"] - 7 * 10**9) * 100 <= 7 * 10**9 and r["d_model"] // 32 == 128]
    assert rows == kept and len(kept) < sum(1 for r in every if abs(r["total"] - 7 * 10**9) * 100 <= 7 * 10**9)


def test_refused_combinations_are_reported_not_raised():
    s = sweep(archspec.preset("gpt2"), {"d_model": [768, 1000, 1536]})
    rows = list(s)
    assert [r["d_model"] for r in rows] == [768, 1536]
    assert s.n_skipped == 1 and "d_model=1000" in str(s.skipped[0]) and "not divisible" in str(s.skipped[0])
    with pytest.raises(SpecError, match="d_model=1000"):
        list(sweep(archspec.preset("gpt2"), {"d_model": [768, 1000]}, strict=True))


@pytest.mark.parametrize(
    "where, words",
    [
        ("d_hed == 128", "unknown field 'd_hed'; did you mean 'd_head'"),
        ("total around 7e9", "expected FIELD OP VALUE"),
        ("activation < swiglu", "compares numbers"),
        ("total within x% of 7e9", "expected FIELD OP VALUE"),
    ],
)
def test_a_bad_constraint_is_one_spec_error(where, words):
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace("?", r"\?")):
        sweep(archspec.preset("gpt2"), {"d_model": [768]}, where=[where])


def test_constraints_compare_exactly():
    c = parse_where("total within 1% of 7e9")
    assert c.holds(7_070_000_000) and not c.holds(7_070_000_001)
    assert parse_where("activation == swiglu").holds("swiglu")


def test_limits_and_sizes_are_checked_before_any_range():
    with pytest.raises(SpecError, match="over the limit"):
        parse_vary("d_model=1:1e20")
    with pytest.raises(SpecError, match="more than a sweep can hold"):
        parse_vary("d_model=1:1e20", limit=None)
    with pytest.raises(SpecError, match="over the limit of 100"):
        sweep(archspec.preset("gpt2"), {"d_model": range(64, 6401, 64), "decoder_layers": [1, 2]}, limit=100)
    with pytest.raises(SpecError, match="over the limit"):
        sweep(archspec.preset("gpt2"), {"d_model": range(1, 10**20)})


def test_a_string_spec_is_a_type_error_naming_the_argument():
    with pytest.raises(TypeError, match=r"sweep: spec must be a ModelSpec, got str 'gpt2'.*archspec.preset"):
        sweep("gpt2", {"d_model": [768]})


ANY = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                st.lists(st.text(max_size=12), max_size=3), st.dictionaries(st.text(max_size=8), st.integers(),
                                                                            max_size=2))  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=st.one_of(ANY, st.just(archspec.preset("gpt2"))), vary=st.one_of(ANY, st.just({"d_model": [768]})),
       seq_len=ANY, dtype=st.one_of(ANY, st.just("bf16")), where=ANY, limit=ANY, zipped=ANY, keep=ANY)  # fmt: skip
def test_sweep_with_any_arguments_is_a_result_or_one_clear_error(spec, vary, seq_len, dtype, where, limit, zipped,
                                                                keep):  # fmt: skip
    try:
        s = sweep(spec, vary, seq_len, dtype, where=where, limit=limit, zipped=zipped, keep=keep)
        list(itertools.islice(iter(s), 3))
    except (SpecError, TypeError) as exc:
        assert str(exc) and "\n" not in str(exc)


# ---------------------------------------------------------------- the command line


def test_cli_csv_file_is_the_api_rows(run_cli, tmp_path):
    out = tmp_path / "shapes.csv"
    code, stdout, _ = run_cli("sweep", "gpt2", "--vary", "d_model=384:1536:384", "--vary", "decoder_layers=6,12",
                              "--where", "d_head == 64", "-o", str(out))  # fmt: skip
    assert code == 0 and stdout == f"wrote {out}: 2 rows (csv) of 8 combinations\n"
    rows = list(csv.DictReader(out.open()))
    api = list(sweep(archspec.preset("gpt2"), ["d_model=384:1536:384", "decoder_layers=6,12"], where="d_head == 64"))
    assert [(int(r["d_model"]), int(r["decoder_layers"]), int(r["total"])) for r in rows] == [
        (r["d_model"], r["decoder_layers"], r["total"]) for r in api]  # fmt: skip
    assert os.listdir(tmp_path) == ["shapes.csv"]  # no temporary file left beside it


def test_cli_jsonl_streams_one_object_a_line(run_cli):
    code, stdout, _ = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:4", "--format", "jsonl")
    lines = stdout.strip().splitlines()
    assert code == 0 and len(lines) == 4
    assert [json.loads(line)["decoder_layers"] for line in lines] == [1, 2, 3, 4]
    assert all(isinstance(json.loads(line)["total"], int) for line in lines)


def test_cli_table_too_long_for_a_terminal_says_how_many_rows(run_cli):
    code, out, err = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:1500")
    assert code == 2 and out == "" and "1,500 rows" in err and "-o FILE.csv" in err and len(err.splitlines()) == 1


def test_cli_over_the_limit_needs_force(run_cli):
    code, _, err = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:30", "--limit", "20")
    assert code == 2 and "30 values, over the limit of 20" in err and "--force" in err
    code, _, err = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:5", "--vary", "d_ff=1:5", "--limit", "20")
    assert code == 2 and "25 combinations, over the limit of 20" in err and "--force" in err
    code, out, _ = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:30", "--limit", "20", "--force",
                           "--format", "jsonl")  # fmt: skip
    assert code == 0 and len(out.strip().splitlines()) == 30


def test_cli_unwritable_output_is_refused_before_work(run_cli, tmp_path):
    code, _, err = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:2", "-o", str(tmp_path / "no" / "x.csv"))
    assert code == 2 and "no such folder" in err
    code, _, err = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:2", "-o", str(tmp_path / "x.parquet"))
    assert code == 2 and "--format" in err
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # running as root: a folder's mode does not stop the writer
            pytest.skip("the folder's mode does not stop this user")
        code, _, err = run_cli("sweep", "gpt2", "--vary", "decoder_layers=1:2", "-o", str(locked / "x.csv"))
        assert code == 2 and "not writable" in err and os.listdir(locked) == []
    finally:
        locked.chmod(0o700)


def test_cli_failure_mid_sweep_leaves_no_file(run_cli, tmp_path):
    out = tmp_path / "rows.csv"
    code, _, err = run_cli("sweep", "gpt2", "--vary", "max_positions=2048,512", "--seq-len", "1024", "-o", str(out))
    assert code == 2 and "max_positions=512" in err
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- pandas and notebooks


def test_to_pandas_of_a_sweep_and_of_a_list_of_results():
    pytest.importorskip("pandas")
    s = sweep(archspec.preset("gpt2"), {"d_model": [768, 1536]})
    frame = s.to_pandas()
    assert list(frame.columns) == s.columns and list(frame["total"]) == [r["total"] for r in s]
    counts = [archspec.count_params(archspec.preset(n)) for n in ("gpt2", "llama-3-8b")]
    frame = archspec.to_pandas(counts)
    assert list(frame["total"]) == [c.total for c in counts]
    assert list(frame["components.mlp"]) == [c.components["mlp"] for c in counts]
    with pytest.raises(TypeError, match="to_pandas"):
        archspec.to_pandas(42)


def test_notebook_html_of_counts_memory_comparisons_and_sweeps():
    from archspec.plan.compare import compare

    gpt2 = archspec.preset("gpt2")
    count = archspec.count_params(gpt2)
    assert f"{count.total:,}" in count._repr_html_()
    mem = estimate_memory(gpt2)
    assert f"{mem.weights_bytes:,}" in mem._repr_html_()
    assert f"{count.total:,}" in compare(gpt2)._repr_html_()
    s = sweep(gpt2, {"decoder_layers": range(1, 101)})
    html = s._repr_html_()
    assert "100 combinations" in html and html.count("<tr>") == 1 + 20  # the header and the first 20 rows


# ---------------------------------------------------------------- the proof holds for derived shapes


@pytest.mark.parametrize(
    "name, changes",
    [("llama-3-8b", {"d_model": 2048, "decoder_layers": 3, "d_ff": 5632}), ("gpt2", {"d_model": 384, "n_heads": 6}),
     ("gemma-3-1b", {"decoder_layers": 7, "d_ff": 1024})],
)  # fmt: skip
def test_shapes_made_by_the_fast_path_count_what_the_reference_model_builds(name, changes):
    pytest.importorskip("torch")
    from archspec.reference import verify

    spec = archspec.preset(name).replace(**changes)
    assert spec == validated_afresh(archspec.preset(name), changes)
    report = verify(spec)
    assert report.ok, report.mismatches()


def test_progress_callback_and_no_bar_off_a_terminal(capsys):
    from archspec.cli.output import progress_callback

    assert progress_callback("sweep") is None  # stderr is not a terminal here: no bar, nothing written
    calls = []
    rows = list(
        sweep(archspec.preset("gpt2"), {"decoder_layers": [1, 2, 3]}, progress=lambda d, t: calls.append((d, t)))
    )
    assert len(rows) == 3 and calls[-1] == (3, 3) and all(t == 3 for _, t in calls)
    assert capsys.readouterr().err == ""


def test_import_archspec_loads_neither_tqdm_nor_pandas():
    import subprocess

    code = "import sys, archspec; print('tqdm' in sys.modules, 'pandas' in sys.modules, callable(archspec.sweep))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_verify_and_sweep_draw_a_progress_bar_on_a_terminal(monkeypatch, capsys):
    from archspec.cli.output import progress

    monkeypatch.setattr(sys, "stderr", _Terminal())
    names = list(progress(["gpt2", "bert-base", "t5-small"], "verify", str))  # what `verify` of many presets walks
    assert names == ["gpt2", "bert-base", "t5-small"]
    drawn = sys.stderr.getvalue()
    assert "verify:" in drawn and "/3" in drawn
    monkeypatch.setattr(sys, "stderr", _Terminal())
    code = main(["sweep", "gpt2", "--vary", "decoder_layers=1:40", "--format", "jsonl"])
    assert code == 0 and "sweep gpt2:" in sys.stderr.getvalue() and "/40" in sys.stderr.getvalue()


def test_a_sweep_past_any_limit_streams_when_asked():
    # 2 x 10^15 combinations with limit=None: the first rows come at once, no list of 10^15 values is made
    s = sweep(archspec.preset("gpt2"), {"decoder_layers": range(1, 10**15), "d_ff": [3072, 4096]}, limit=None)
    assert s.n_combinations == 2 * (10**15 - 1) and "decoder_layers=1:999999999999999:1" in repr(s)
    first = [(r["decoder_layers"], r["d_ff"]) for r in itertools.islice(iter(s), 3)]
    assert first == [(1, 3072), (1, 4096), (2, 3072)]
