"""Published claims: statuses, explanations recomputed, and user claim files."""

import re

import pytest

import archspec
from archspec.count.params import count_params
from archspec.io.catalog import get_preset
from archspec.validate.claims import assess, parse_printed

ALL = archspec.presets()


def test_validate_over_all_presets_exits_0_with_the_json_shape(run_cli):
    import json

    code, out, _ = run_cli("validate", "--format", "json")
    assert code == 0
    objs = json.loads(out)
    assert [o["name"] for o in objs] == ALL
    for o in objs:
        assert o["claims"], o["name"]
        for c in o["claims"]:
            keys = {"quantity", "claimed", "printed", "source", "computed", "deviation", "status", "explanation"}
            assert keys <= set(c)
            assert c["status"] in ("match", "truncated", "near", "off")
            if c["quantity"] == "params":
                assert type(c["computed"]) is int
            assert c["status"] != "off" or c["explanation"]


def test_the_table_shows_sources_statuses_and_notes(run_cli):
    code, out, _ = run_cli("validate", "transformer-base")
    assert code == 0 and "Vaswani et al. 2017, Table 3" in out and "off" in out and "[1]" in out


FALSE_CLAIM = """
[defaults]
vocab_size = 50257
max_positions = 1024

[models.my-gpt]
decoder_layers = 12
d_model = 768
n_heads = 12

[[models.my-gpt.claims]]
quantity = "params"
printed = "124M"
source = "our model card"

[[models.my-gpt.claims]]
quantity = "params"
printed = "150M"
source = "our blog post"
"""


def test_a_false_claim_exits_1_and_is_named(run_cli, tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text(FALSE_CLAIM)
    code, out, _ = run_cli("validate", str(path))
    assert code == 1
    assert "off with no recorded explanation: my-gpt params 150M (our blog post)" in out


def test_an_explained_false_claim_passes(run_cli, tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text(FALSE_CLAIM + 'explanation = "counted with the optimizer\'s bias tables"\n')
    code, _, _ = run_cli("validate", str(path))
    assert code == 0


@pytest.mark.parametrize(
    "claim, message",
    [
        ('quantity = "params"\nprinted = "1M"\nsource = "x"\ncolour = "red"\n', "unknown claim field 'colour'"),
        ('quantity = "speed"\nprinted = "1M"\nsource = "x"\n', "quantity"),
        ('quantity = "params"\nprinted = "1M"\n', "missing required field 'source'"),
        ('quantity = "params"\nprinted = "lots"\nsource = "x"\n', "is not a number"),
        ('quantity = "training_flops"\nprinted = "1e20"\nsource = "x"\nmethod = "6nd"\n', "needs tokens"),
        ('quantity = "pf_days"\nprinted = "3"\nsource = "x"\n', "needs a method"),
    ],
)
def test_bad_or_incomplete_claims_are_one_line_and_exit_2(run_cli, tmp_path, claim, message):
    path = tmp_path / "bad.toml"
    path.write_text(FALSE_CLAIM.split("[[models")[0] + "[[models.my-gpt.claims]]\n" + claim)
    code, _, err = run_cli("validate", str(path))
    assert code == 2 and message in err and err.count("\n") == 1


def test_a_spec_file_is_pointed_to_the_presets_format(run_cli, tmp_path):
    path = tmp_path / "spec.toml"
    path.write_text('name = "x"\nvocab_size = 10\nd_model = 8\ndecoder_layers = 1\nn_heads = 2\nmax_positions = 4\n')
    code, _, err = run_cli("validate", str(path))
    assert code == 2 and "presets' format" in err


@pytest.mark.parametrize(
    "printed, value, precision",
    [("117M", 117e6, 1e6), ("1.3B", 1.3e9, 1e8), ("12,850M", 12.85e9, 1e7), ("3.14E+23", 3.14e23, 1e21),
     ("2.60", 2.60, 0.01), ("3640", 3640, 10), ("340M", 340e6, 1e7), ("109,482,240", 109482240, 10)],
)  # fmt: skip
def test_printed_precision_is_the_last_significant_digit(printed, value, precision):
    v, p = parse_printed(printed)
    assert float(v) == pytest.approx(value) and float(p) == pytest.approx(precision)


# ---------------------------------------------------------------- explanations, recomputed


def test_tensor2tensor_vocabulary_turns_63_1m_into_65m():
    d = 512
    rest = count_params(archspec.preset("transformer-base")).total - 37000 * d  # everything but the shared matrix
    assert round((rest + 40960 * d) / 1e6) == 65
    assert round((rest + 37000 * d) / 1e5) / 10 == 63.1


def test_213m_implies_a_vocabulary_unlike_base_65m():
    base = {c.printed: assess(archspec.preset("transformer-base"), c) for c in get_preset("transformer-base").claims}
    big = {c.printed: assess(archspec.preset("transformer-big"), c) for c in get_preset("transformer-big").claims}
    b, g = base["65M"].implied, big["213M"].implied
    # independently: V such that count(V) rounds to the figure, count affine in V with slope d_model
    rest = count_params(archspec.preset("transformer-big")).total - 37000 * 1024
    inside = [V for V in range(30000, 45000) if round((rest + V * 1024) / 1e6) == 213]
    assert (g["low"], g["high"]) == (inside[0], inside[-1])
    assert g["high"] < b["low"] and not g["low"] <= 40960 <= g["high"]


@pytest.mark.parametrize("name, printed", [("gpt2", 117), ("gpt2-medium", 345), ("gpt2-large", 762), ("gpt2-xl", 1542)])
def test_gpt1_vocabulary_reproduces_the_gpt2_papers_figures(name, printed):
    spec = archspec.preset(name)
    total = count_params(spec).total - (50257 - 40478) * spec.d_model
    assert round(total / 1e6) == printed


def test_gpt3_rows_as_printed():
    xl = count_params(archspec.preset("gpt3-xl").replace(n_heads=24, d_head=128)).total
    b13 = count_params(archspec.preset("gpt3-13b").replace(d_model=5140, d_head=128)).total
    assert round(xl / 1e7) / 100 == 1.52  # vs 1.3B (Table 2.1) and 1,320M (Table D.1)
    assert round(b13 / 1e7) / 100 == 12.94  # vs 13.0B and 12,850M
    assert round(count_params(archspec.preset("gpt3-13b")).total / 1e7) / 100 == 12.85
    assert round(count_params(archspec.preset("gpt3-medium")).total / 1e5) / 10 == 355.9


@pytest.mark.parametrize("name, printed, hours", [("transformer-base", 3.3e18, 12), ("transformer-big", 2.3e19, 84)])
def test_2017_training_costs_come_from_hardware_time(name, printed, hours):
    (claim,) = [c for c in get_preset(name).claims if c.quantity == "training_flops"]
    a = assess(archspec.preset(name), claim)
    assert a.computed == 8 * 9.5e12 * hours * 3600
    assert a.status == "match" and float(f"{a.computed:.1e}") == printed


NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)([MB])\b")


def _family_values(name):
    """Every count the explanation may refer to: the family's exact counts, what-ifs, printed claims."""
    p = get_preset(name)
    same_family = [get_preset(n) for n in ALL if get_preset(n).family == p.family]
    values = []
    for q in same_family:
        values.append(count_params(q.spec).total)
        for c in q.claims:
            a = assess(q.spec, c)
            values.append(float(a.claimed))
            if a.what_if:
                values.append(a.what_if["computed"])
    return values


@pytest.mark.parametrize("name", ALL)
def test_every_number_in_an_explanation_is_recomputed(name):
    """A count an explanation states must be one archspec computes (or a figure the sources print)."""
    values = _family_values(name)
    for claim in get_preset(name).claims:
        for digits, suffix in NUMBER.findall(claim.explanation or ""):
            stated, precision = parse_printed(digits + suffix)
            hits = [v for v in values if abs(v - float(stated)) <= float(precision) / 2]
            assert hits, f"{name}: {digits}{suffix} in {claim.printed!r}'s explanation is computed nowhere"


def test_set_on_a_claims_file_is_validated(run_cli, tmp_path):
    path = tmp_path / "claims.toml"
    path.write_text(FALSE_CLAIM)
    code, _, err = run_cli("validate", str(path), "--set", "n_heads=7")
    assert code == 2 and "not divisible by n_heads=7" in err and err.count("\n") == 1


def test_deepseek_v3_685b_is_the_checkpoint_with_its_prediction_module_and_block_scales():
    """The README's 685B: the main model, the multi-token-prediction module the checkpoint stores as layer 61
    (one more MoE decoder layer, eh_proj from 2d to d, enorm, hnorm, shared_head.norm, its own token table and
    head), and the fp32 scale of each 128 x 128 block of the FP8 experts. The module is counted here from
    transformers' own model: a MoE layer is what a fifth layer adds to a four-layer DeepseekV3ForCausalLM."""
    import json
    import math
    from pathlib import Path

    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    raw = json.loads((Path(__file__).parent / "data" / "hf" / "deepseek-v3.json").read_text(encoding="utf-8"))
    raw.pop("quantization_config", None)

    def built(layers: int) -> int:
        with torch.device("meta"):
            model = DeepseekV3ForCausalLM(DeepseekV3Config(**{**raw, "num_hidden_layers": layers}))
        return sum(p.numel() for p in model.parameters())

    d, V = raw["hidden_size"], raw["vocab_size"]
    module = built(5) - built(4) + 2 * d * d + 3 * d + 2 * V * d
    spec = archspec.preset("deepseek-v3")
    assert count_params(spec, mtp=True).components["mtp"] == module == 13_463_426_048
    total = count_params(spec, mtp=True).total
    assert total == count_params(spec).total + module == 684_489_830_400 and round(total / 1e9) == 684
    blocks = math.ceil(raw["moe_intermediate_size"] / 128) * math.ceil(d / 128)
    moe_layers = raw["num_hidden_layers"] - raw["first_k_dense_replace"]
    scales = raw["n_routed_experts"] * 3 * blocks * moe_layers
    assert scales == 39_911_424 and round((total + scales) / 1e9) == 685
    (claim,) = [c for c in get_preset("deepseek-v3").claims if c.printed == "685B"]
    for figure in ("684,489,830,400", "13,463,426,048", "39,911,424"):
        assert figure in claim.explanation
