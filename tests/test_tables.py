"""A paper's whole table in one file, checked row by row; the statuses and explanations of claims."""

import json
import re

import pytest

import archspec
from archspec.count.params import count_params
from archspec.io.catalog import preset_names
from archspec.io.tables import load_table, packaged
from archspec.validate.claims import Claim, assess, status_of

TABLE = """
[table]
title = "GPT-2, Table 2"
source = "Radford et al. 2019, Table 2"

[defaults]
vocab_size = 50257
max_positions = 1024

[[rows]]
name = "small"
quote = "117M 12 768"
decoder_layers = 12
d_model = 768
n_heads = 12
params = "124M"
non_embedding_params = "85M"

[[rows]]
name = "medium"
quote = "345M 24 1024"
decoder_layers = 24
d_model = 1024
n_heads = 16
params = { printed = "355M", explanation = "as released" }
"""


def _gpt2_count(L, d, V=50257, T=1024):
    """GPT-2's count by its own layout: per layer two LayerNorms, QKV and output projections, a 4d MLP,
    all with biases; token and position tables; a final LayerNorm; the head tied."""
    per_layer = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    return L * per_layer + V * d + T * d + 2 * d


def test_a_whole_table_is_checked_in_one_run_one_object_per_row(run_cli, tmp_path):
    path = tmp_path / "gpt2.toml"
    path.write_text(TABLE)
    code, out, _ = run_cli("validate", str(path), "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["small", "medium"]
    assert rows[0]["quote"] == "117M 12 768" and rows[0]["table"] == "GPT-2, Table 2"
    small, medium = rows[0]["claims"], rows[1]["claims"]
    assert small[0]["computed"] == _gpt2_count(12, 768)
    assert small[1]["computed"] == _gpt2_count(12, 768) - 50257 * 768 - 1024 * 768
    assert medium[0]["computed"] == _gpt2_count(24, 1024) and medium[0]["explanation"] == "as released"
    assert [c["source"] for c in small + medium] == ["Radford et al. 2019, Table 2"] * 3


def test_the_text_report_has_one_line_per_row_and_a_summary(run_cli, tmp_path):
    path = tmp_path / "gpt2.toml"
    path.write_text(TABLE)
    code, out, _ = run_cli("validate", str(path))
    lines = out.splitlines()
    assert code == 0 and lines[0] == "GPT-2, Table 2 (Radford et al. 2019, Table 2)"
    assert [ln.split()[0] for ln in lines[3:5]] == ["small", "medium"]
    assert "2 rows, 3 printed figures: 3 match, 0 truncated" in out


@pytest.mark.parametrize(
    "change, message",
    [
        (("d_model = 1024", "d_modle = 1024"),
         "rows[1] (medium): missing required field 'd_model'; unknown field 'd_modle'"),
        (('name = "medium"', 'name = "small"'), "rows[1] (small): the name 'small' is also rows[0]'s"),
        (('non_embedding_params = "85M"', 'non_embedding_params = "lots"'),
         "rows[0] (small).non_embedding_params: claimed figure 'lots' is not a number"),
        (('non_embedding_params = "85M"', "non_embedding_params = 85"),
         "rows[0] (small).non_embedding_params must be text as printed"),
        (('name = "medium"', 'nam = "medium"'), "rows[1] has no name"),
        (('params = { printed = "355M", explanation = "as released" }', 'params = { printed = "355M", colour = 1 }'),
         "rows[1] (medium).params: unknown claim field 'colour'"),
        (('params = "124M"', 'params = { printed = "124M", conventions = ["norms_out"] }'),
         "unknown convention 'norms_out'"),
    ],
)  # fmt: skip
def test_bad_tables_are_one_line_and_exit_2(run_cli, tmp_path, change, message):
    path = tmp_path / "bad.toml"
    assert change[0] in TABLE
    path.write_text(TABLE.replace(change[0], change[1], 1))
    code, out, err = run_cli("validate", str(path))
    assert code == 2 and out == "" and message in err and err.count("\n") == 1, err


def test_an_off_row_exits_1_and_is_named(run_cli, tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(TABLE.replace('"85M"', '"95M"'))
    code, out, _ = run_cli("validate", str(path))
    assert code == 1 and "off with no recorded explanation: small non_embedding_params 95M" in out


# ---------------------------------------------------------------- statuses


LLAMA_65B = archspec.ModelSpec(
    name="llama-65b", vocab_size=32000, d_model=8192, decoder_layers=80, n_heads=64, d_ff=22016,
    max_positions=2048, position="rotary", norm="rmsnorm", activation="swiglu", bias=False, tie_embeddings=False,
)  # fmt: skip


def test_truncation_is_a_status_beside_rounding():
    d, L, f, V = 8192, 80, 22016, 32000
    exact = L * (4 * d * d + 3 * d * f + 2 * d) + 2 * V * d + d  # attention, SwiGLU, two RMSNorms; tables; final norm
    assert count_params(LLAMA_65B).total == exact
    claim = Claim(quantity="params", printed="65.2B", source="Touvron et al. 2023, Table 2")
    a = assess(LLAMA_65B, claim)
    assert a.status == "truncated" and a.computed == exact
    assert status_of(exact, 65.3e9, 1e8)[0] == "match"  # rounded, it is 65.3B
    assert status_of(65_299_999_999, 65.2e9, 1e8)[0] == "truncated"
    assert status_of(65_300_000_000, 65.2e9, 1e8)[0] == "near"  # cut off, it is 65.3B
    assert status_of(355_000_000, 300e6, 1e8)[0] == "off"  # '300M' cuts 355M off, but 18% is no truncation


def test_embedding_params_are_the_tables_and_head():
    spec = archspec.preset("gpt2")
    a = assess(spec, Claim(quantity="embedding_params", printed="39,383,808", source="50257 x 768 + 1024 x 768"))
    assert a.computed == 50257 * 768 + 1024 * 768 and a.status == "match"


WHAT_IF = TABLE.replace('params = "124M"', 'params = { printed = "117M", what_if = { vocab_size = 40478 }%s }')


def test_a_sourced_what_if_that_reproduces_the_figure_explains_it(run_cli, tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(WHAT_IF % ', what_if_source = "GPT-1 vocabulary, Radford et al. 2018"')
    code, out, _ = run_cli("validate", str(path), "--format", "json")
    (claim, _) = json.loads(out)[0]["claims"]
    assert code == 0 and claim["status"] == "off" and claim["what_if"]["status"] == "match"
    assert claim["what_if"]["computed"] == _gpt2_count(12, 768, V=40478)
    assert "GPT-1 vocabulary" in claim["explanation"]


def test_a_hypothesis_that_reproduces_the_figure_is_no_explanation(run_cli, tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(WHAT_IF % "")
    code, out, _ = run_cli("validate", str(path))
    assert code == 1 and "small params 117M" in out


# ---------------------------------------------------------------- conventions


def _gpt2_norms(L, d):
    return (2 * L + 1) * 2 * d  # two LayerNorms per layer and the final one, weight and bias


def test_a_named_convention_is_recomputed_and_explains_the_figure(run_cli, tmp_path):
    without = _gpt2_count(12, 768) - _gpt2_norms(12, 768)
    printed = f"{without:,}"
    path = tmp_path / "t.toml"
    path.write_text(
        TABLE.replace('params = "124M"', f'params = {{ printed = "{printed}", conventions = ["norms_left_out"] }}')
    )
    code, out, _ = run_cli("validate", str(path), "--format", "json")
    claim = json.loads(out)[0]["claims"][0]
    assert code == 0 and claim["conventions"]["computed"] == without and claim["conventions"]["status"] == "match"
    assert claim["explanation"] == "counted with norm weights left out, as the source counts"


def test_the_search_names_the_conventions_that_reproduce_an_off_figure():
    spec = archspec.preset("gpt2")
    twice = _gpt2_count(12, 768) + 50257 * 768 - _gpt2_norms(12, 768)
    a = assess(spec, Claim(quantity="params", printed=f"{twice:,}", source="x"))
    assert a.status == "off" and not a.explained
    assert [s["conventions"] for s in a.suggestions] == [["norms_left_out", "tied_counted_twice"]]
    assert a.suggestions[0]["computed"] == twice


def test_a_padded_vocabulary_is_searched():
    spec = archspec.preset("gpt2")
    padded = _gpt2_count(12, 768, V=50304)  # 50257 rounded up to a multiple of 64 (and of 128)
    a = assess(spec, Claim(quantity="params", printed=f"{padded:,}", source="x"))
    assert [s["conventions"] for s in a.suggestions] == [["vocab_padded_to_64"], ["vocab_padded_to_128"]]


# ---------------------------------------------------------------- the packaged tables, typed from the papers

TABLES = sorted(packaged())


def test_the_papers_tables_are_packaged_under_names_no_preset_has():
    assert {"pythia", "llama", "opt", "gemma", "gemma-2"} <= set(TABLES)
    assert not set(TABLES) & set(preset_names())


# figures that are names of sizes, not counts: each explained in its table, its count stated in the explanation
LABELS = {("opt", "opt-350m", "350M")}


@pytest.mark.parametrize("name", TABLES)
def test_every_printed_figure_of_a_papers_table_is_reproduced_or_explained(name):
    """Held to the printed precision: each figure rounds (or is cut off) to what the paper prints, or the
    claim names the conventions or the sourced what-if that reproduce it; the few labels are listed."""
    table = load_table(name)
    assert table.source and table.rows
    for row in table.rows:
        assert row.quote and row.source, row.spec.name
        for claim in row.claims:
            a = assess(row.spec, claim)
            if (name, row.spec.name, claim.printed) in LABELS:
                assert a.status == "off" and f"{a.computed / 1e6:.1f}M" in a.explanation
                continue
            assert a.status in ("match", "truncated") or a.by_conventions or a.sourced_what_if, (row.spec.name, a)


@pytest.mark.parametrize("name", TABLES)
def test_a_packaged_table_validates_in_one_run(run_cli, name):
    code, out, _ = run_cli("validate", name, "--format", "json")
    rows = json.loads(out)
    assert code == 0 and [r["name"] for r in rows] == [r.spec.name for r in load_table(name).rows]


def test_pythias_non_embedding_counts_are_gpt_neox_layers_by_hand():
    """Each GPT-NeoX layer: two LayerNorms, QKV and output projections and a 4d MLP, all with biases
    (12 d^2 + 13 d); one final LayerNorm. The paper's figures, archspec's, and this formula agree."""
    for row in load_table("pythia").rows:
        L, d = row.spec.decoder_layers, row.spec.d_model
        (printed,) = [c.printed for c in row.claims if c.quantity == "non_embedding_params"]
        by_hand = L * (12 * d * d + 13 * d) + 2 * d
        assert int(printed.replace(",", "")) == by_hand == count_params(row.spec).non_embedding


def test_llamas_widths_follow_the_reference_code():
    """model.py: hidden = int(2 * 4d / 3), rounded up to a multiple of 256."""
    for row in load_table("llama").rows:
        hidden = int(2 * 4 * row.spec.d_model / 3)
        assert row.spec.d_ff == 256 * -(-hidden // 256)


@pytest.mark.parametrize("name", ["gemma", "gemma-2"])
def test_gemmas_embedding_counts_are_one_tied_table_of_256128_rows(name):
    for row in load_table(name).rows:
        (printed,) = [c.printed for c in row.claims if c.quantity == "embedding_params"]
        assert int(printed.replace(",", "")) == 256128 * row.spec.d_model


def test_an_off_figure_no_convention_explains_is_matched_to_a_term_of_the_formula():
    pytest.importorskip("sympy")
    spec = archspec.preset("gpt2-medium")
    L, d = spec.decoder_layers, spec.d_model
    printed = count_params(spec).total + L * d * d  # one layer's worth of d x d matrices per layer too many
    a = assess(spec, Claim(quantity="params", printed=f"{printed:,}", source="x"))
    assert a.status == "off" and a.suggestions == []
    assert a.gap_term == {"gap": L * d * d, "term": "L·d²", "value": L * d * d, "of": "12·L·d²", "times": 12}


@pytest.mark.parametrize("per_layer", [True, False])
def test_relative_position_terms_left_out_are_transformer_xls_projections_and_biases(per_layer):
    """Each layer's W_r is d_model x (n_heads * d_head) = d^2 for GPT-2's shapes; u and v are n_heads x d_head
    each (2d), in every layer or once for the stack."""
    from archspec.validate.conventions import counts_under

    spec = archspec.preset("gpt2").replace(position={"kind": "transformer_xl", "per_layer": per_layer})
    L, d = 12, 768
    terms = L * d * d + (L if per_layer else 1) * 2 * d
    full, without = counts_under(spec), counts_under(spec, ["relative_positions_left_out"])
    assert full.params - without.params == terms == full.non_embedding_params - without.non_embedding_params
    a = assess(spec, Claim(quantity="params", printed=f"{without.params:,}", source="x"))
    assert ["relative_positions_left_out"] in [s["conventions"] for s in a.suggestions]


def test_an_unknown_name_is_offered_the_presets_and_tables_near_it(run_cli):
    code, _, err = run_cli("validate", "pythai")
    assert code == 2 and "unknown preset or table 'pythai'; did you mean 'pythia'" in err and err.count("\n") == 1


def test_an_unknown_key_in_the_table_header_is_refused(run_cli, tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(TABLE.replace('title = "GPT-2, Table 2"', 'title = "GPT-2, Table 2"\nyear = 2019'))
    code, _, err = run_cli("validate", str(path))
    assert code == 2 and "unknown key table.year" in err and err.count("\n") == 1


def test_rows_that_follow_one_convention_share_one_note_and_show_their_status_as_counted(run_cli, tmp_path):
    rows = []
    for name, L, d, h in (("small", 12, 768, 12), ("medium", 24, 1024, 16)):
        twice = _gpt2_count(L, d) + 50257 * d  # the tied table counted as the head too
        rows.append(f'[[rows]]\nname = "{name}"\ndecoder_layers = {L}\nd_model = {d}\nn_heads = {h}\n'
                    f'params = {{ printed = "{twice:,}", conventions = ["tied_counted_twice"] }}\n')  # fmt: skip
    path = tmp_path / "t.toml"
    path.write_text(TABLE.split("[[rows]]")[0] + "\n".join(rows))
    code, out, _ = run_cli("validate", str(path))
    lines = out.splitlines()
    assert code == 0 and [ln.split()[-1] for ln in lines[3:5]] == ["[1]", "[1]"]
    assert "off" in lines[3] and "match as counted" in lines[3]
    assert "[1] 2 rows, small to medium: counted with the tied embedding counted twice" in out
    assert "2 off (2 explained)" in out


def test_the_papers_page_lists_every_packaged_table():
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "papers.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", page, re.M))
    assert listed == set(TABLES)


def test_an_untied_head_counted_as_non_embedding_is_a_convention():
    """LLaMA-7B: N without the tables is L(4d² + 3df + 2d) + d; with the head (V x d) among them, V·d more."""
    spec = load_table("llama").rows[0].spec
    d, L, f, V = 4096, 32, 11008, 32000
    with_head = L * (4 * d * d + 3 * d * f + 2 * d) + d + V * d
    a = assess(spec, Claim(quantity="non_embedding_params", printed=f"{with_head:,}", source="x"))
    assert [s["conventions"] for s in a.suggestions] == [["head_in_non_embedding"]]
