"""Hostile inputs at scale and in detail: stacks of a million layers, specs of many kinds, plans no
machine holds, exact sums of huge specs, the messages of malformed config.json values, and `compare`
at every terminal width.

The contract is tests/test_hostile.py's: a right answer, or exit 2 with one line on stderr naming the
problem (SpecError or TypeError from the API), never a traceback. How long these take is measured by
benchmarks/hostile.py, not asserted here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_hostile import cli, refused

import archspec
from archspec.hf import from_mapping
from archspec.io.loading import build_spec

HF = Path(__file__).parent / "data" / "hf"


def released(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text(encoding="utf-8"))


def qwen35(name: str, layers: int, layer_types: bool) -> archspec.ModelSpec:
    """A released Qwen3.5 config.json with `layers` layers (its unit of three Gated DeltaNet layers and one
    attention layer repeated), written out in layer_types or left to full_attention_interval."""
    raw = released(name)
    text = raw["text_config"]
    text["num_hidden_layers"] = layers
    if layer_types:
        text["layer_types"] = ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(layers)]
    else:
        del text["layer_types"]
    return build_spec(from_mapping(raw, name).data)


# ---------------------------------------------------------------- a million layers


@pytest.mark.parametrize("layer_types", [True, False], ids=["layer_types", "interval"])
@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3.5-35b-a3b"])
def test_a_million_layer_qwen35_config_counts_as_its_unit_repeated(name, layer_types):
    # each unit of four layers adds what the 68-layer stack has over the 64-layer one
    small, larger = (archspec.count_params(qwen35(name, n, True)).total for n in (64, 68))
    huge = qwen35(name, 10**6, layer_types)
    assert archspec.count_params(huge).total == small + (10**6 - 64) // 4 * (larger - small)
    assert huge.layers.pattern == ("deltanet", "deltanet", "deltanet", "attention")


@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b-thinking"])
def test_a_qwen_hybrid_read_from_its_interval_is_the_one_its_layer_types_give(name):
    """Without layer_types the kinds repeat every lcm(interval, sparse step) layers, and the reader looks at
    three such units: the spec is the one the whole per-layer list gives, at every depth and unit."""
    for every, step in ((4, 1), (3, 1), (2, 3), (5, 2), (1, 1)):
        for layers in [*range(1, 40), 97, 1000]:
            raw = released(name)
            text = raw.get("text_config", raw)
            text.update(num_hidden_layers=layers, full_attention_interval=every)
            text.pop("layer_types", None)
            if "decoder_sparse_step" in text:
                text["decoder_sparse_step"] = step
            listed = json.loads(json.dumps(raw))
            listed.get("text_config", listed)["layer_types"] = [
                "full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)]
            try:
                expected = build_spec(from_mapping(listed, name).data)
            except archspec.SpecError as exc:  # refused with the list: refused alike without it
                with pytest.raises(archspec.SpecError, match=re.escape(str(exc)[:40])):
                    build_spec(from_mapping(raw, name).data)
                continue
            got = build_spec(from_mapping(raw, name).data)
            assert (got.layers, got.kinds) == (expected.layers, expected.kinds), (name, every, step, layers)


def test_a_config_json_of_a_million_layer_types_is_refused_by_its_size(tmp_path):
    raw = released("qwen3.5-27b")
    raw["text_config"]["num_hidden_layers"] = 10**6
    raw["text_config"]["layer_types"] = ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(10**6)]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    refused("params", path, message="the most archspec reads from a spec file")


def test_a_million_layer_config_json_through_the_command_line(tmp_path):
    raw = released("qwen3.5-35b-a3b")
    raw["text_config"]["num_hidden_layers"] = 10**6
    del raw["text_config"]["layer_types"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    code, out, err = cli("params", path, "--format", "json")
    assert code == 0, err
    assert json.loads(out)[0]["total"] == archspec.count_params(qwen35("qwen3.5-35b-a3b", 10**6, False)).total


def test_compact_by_periods_is_the_shortest_prefix_and_unit_by_search():
    """The one-pass form (for units longer than compact's short search) against the definition, searched by
    brute force, over every list of up to 9 layers of 2 kinds, and a few long random ones."""
    import itertools
    import random

    from archspec.spec.layers import SHORT, _by_periods, compact

    def searched(kinds):
        for size in range(1, len(kinds) + 1):
            for start in range(size):
                rest, unit = kinds[start:], kinds[start:size]
                if all(rest[i] == unit[i % len(unit)] for i in range(len(rest))):
                    return start, size - start
        return 0, 0

    for n in range(10):
        for kinds in itertools.product("ab", repeat=n):
            assert _by_periods(list(kinds)) == searched(list(kinds)), kinds
    rng = random.Random(31)
    for _ in range(20):
        unit = [rng.choice("abc") for _ in range(rng.randint(SHORT - 3, SHORT + 9))]
        kinds = [rng.choice("abc") for _ in range(rng.randint(0, 5))] + unit * 3 + unit[: rng.randint(0, len(unit))]
        start, size = searched(kinds)
        assert compact(kinds) == (kinds[:start], kinds[start : start + size]), kinds


# ---------------------------------------------------------------- exact sums of huge specs


@pytest.mark.parametrize("pipeline_parallel", [1, 3, 7, 96])
def test_training_bytes_of_a_huge_spec_are_exact(pipeline_parallel):
    """Beyond 2^53 parameters a float quotient is no longer whole bytes: each figure is ceil(N * bytes / p),
    computed here with Fractions from the parameter count (one dense stack: every rank holds N / p)."""
    import math
    from fractions import Fraction

    huge = archspec.preset("gpt3-175b").replace(decoder_layers=2**19, d_model=2**16, n_heads=512, d_ff=2**18)
    n = archspec.count_params(huge).total
    assert n > 2**53
    m = archspec.estimate_memory(huge, 1, 2048, pipeline_parallel=pipeline_parallel)
    # mixed precision with AdamW: 2 bytes of bf16 weights, 2 of gradients, 12 of fp32 master copy and states
    expected = [math.ceil(Fraction(n * b, pipeline_parallel)) for b in (2, 2, 12)]
    assert [m.weights_bytes, m.gradients_bytes, m.optimizer_bytes] == expected
    assert all(type(x) is int for x in expected)


def test_swiglu_width_of_a_huge_model_is_exact():
    from archspec.core.sizing import swiglu_hidden

    d = 3 * 2**60 + 3
    assert swiglu_hidden(d, 1) == 8 * d // 3 == 2**63 + 8


# ---------------------------------------------------------------- messages that name the key


@pytest.mark.parametrize(("name", "at", "key", "value"), [
    ("qwen3.5-27b", "text_config", "num_hidden_layers", "64"),
    ("qwen3.5-27b", "text_config.rope_parameters", "rope_theta", "1e7"),
    ("llama-3.2-1b", "", "rope_theta", "500000.0"),
    ("llama-3.2-1b", "", "num_hidden_layers", "sixteen"),
    ("gpt2", "", "n_layer", "12"),
    ("llama-3.2-1b", "", "rope_theta", [500000.0]), ("llama-3.2-1b", "", "intermediate_size", [8192]),
    ("llama-3.2-1b", "", "num_hidden_layers", True), ("gpt2", "", "n_embd", {"value": 768}),
    ("llama-3.2-1b", "", "num_key_value_heads", "8"), ("qwen3.5-27b", "text_config", "head_dim", "256"),
])  # fmt: skip
def test_a_config_value_that_is_not_a_number_is_refused_by_its_key(tmp_path, name, at, key, value):
    raw = released(name)
    table = raw
    for step in filter(None, at.split(".")):
        table = table[step]
    table[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    err = refused("params", path, message=f"key {key}=")
    assert "is not a number" in err
    with pytest.raises(archspec.SpecError, match=f"key {key}=.* is not a number"):
        archspec.load_spec(path)


def test_a_pattern_of_letters_where_transformers_defaults_a_number_still_reads():
    # Exaone 4's sliding_window_pattern is "LLLG" in the released file (the class defaults it to 4)
    assert released("exaone-4.0-32b")["sliding_window_pattern"] == "LLLG"
    assert from_mapping(released("exaone-4.0-32b"), "exaone").data["name"] == "exaone"


# ---------------------------------------------------------------- compare at every width


@pytest.mark.skipif(__import__("sys").platform == "win32", reason="pseudo-terminals are POSIX")
@pytest.mark.parametrize("columns", [60, 80, 100, 200])
def test_compare_stays_side_by_side_at_any_width(columns):
    import re

    from test_frontdoor import on_terminal

    models = ["gpt2", "llama-3-8b", "mixtral-8x7b"]
    seen = re.sub(r"\x1b\[[0-9;]*m", "", on_terminal(["compare", *models], columns)).replace("\r", "")
    lines = seen.splitlines()
    assert max(map(len, lines)) <= columns, max(lines, key=len)
    headers = [line.split() for line in lines if line.startswith("model ")]
    if columns < 175:  # the full table is 175 columns wide: turned, a field a row, the models side by side
        assert len(headers[0]) >= 3
        assert [name for h in headers for name in h[1:]] == models
        assert any(re.match(r"^d_model +768 +4096", line) for line in lines)
    else:
        assert [line.split()[0] for line in lines[2:5]] == models
    piped = cli("compare", *models)[1]
    assert max(map(len, piped.splitlines())) == 175  # piped: full width, one row a model, notes unwrapped


def test_a_turned_table_splits_its_records_into_groups_that_fit():
    from archspec.render.text import table

    rows = [[f"model-{i}", "12", "a value of some width", "3.5B"] for i in range(5)]
    headers = ["model", "layers", "what it says", "params"]
    text = table(rows, headers, "table", width=40, transpose=True)
    assert max(map(len, text.splitlines())) <= 40
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and all(b.splitlines()[0].startswith("model ") for b in blocks)
    assert [n for b in blocks for n in b.splitlines()[0].split()[1:]] == [r[0] for r in rows]
    assert table(rows, headers, "table", width=500, transpose=True) == table(rows, headers, "table", width=500)


# ---------------------------------------------------------------- fit's layout search


def test_the_layout_search_finds_the_smallest_as_a_scan_does():
    """_smallest against a scan: step functions (only the sign tells), bytes spread over n devices with a
    share that does not spread, and the same with points already probed, for every answer and bracket."""
    import random

    from archspec.plan.fit import _halving, _smallest

    rng = random.Random(31)
    for answer in [*range(1, 40), None]:
        fixed = rng.randrange(0, 10**6)
        spread = (answer or 10**9) * (10**7 - fixed) + rng.randrange(0, 10**5)  # fits from `answer` on
        shapes = {
            "step": lambda n, answer=answer: 0 if answer is not None and n >= answer else 1,
            "a + b / n": lambda n, spread=spread, fixed=fixed: fixed - 10**7 + -(-spread // n),
        }
        for name, excess in shapes.items():
            for lo in range(1, 12):
                for hi in (lo - 1, lo, 17, 40):
                    asked = []

                    def probe(n, excess=excess, asked=asked):
                        asked.append(n)
                        return excess(n)

                    scan = next((n for n in range(lo, hi + 1) if excess(n) <= 0), None)
                    assert _smallest(lo, hi, probe) == scan == _halving(lo, hi, excess), (name, answer, lo, hi)
                    assert all(lo <= n <= hi for n in asked)
                    known = [(n, excess(n)) for n in rng.sample(range(1, 45), 6)]
                    assert _smallest(lo, hi, excess, known) == scan, (name, answer, lo, hi, known)


def test_a_pipeline_stage_left_without_a_layer_is_refused_by_name(run_cli):
    """32 layers on 10 stages at ceil(32/10) = 4 a stage fill 8 stages: two devices would hold nothing."""
    code, _, err = run_cli("inference", "llama-3-8b", "--gpu", "h100", "--pp", "10", "-p", "16", "-g", "16")
    assert code == 2 and "leaves 2 stages of llama-3-8b without a layer" in err and err.count("\n") == 1
    with pytest.raises(archspec.SpecError, match="without a layer"):
        archspec.estimate_memory(archspec.preset("llama-3-8b"), 1, 16, pipeline_parallel=10)


def test_a_stage_that_caches_nothing_limits_no_batch():
    """nemotron-h-56b at one layer a stage: some stages hold only an MLP layer and cache nothing; the
    largest batch is the caching stages' (each stage holds one layer: the attention layer's stage decides)."""
    from archspec.plan.inference import estimate_inference

    spec = archspec.preset("nemotron-h-56b")
    e = estimate_inference(spec, "h100", batch=1, prompt_len=16, gen_len=16, pipeline_parallel=spec.n_layers)
    assert e.max_batch is not None and e.max_batch > 0


# ---------------------------------------------------------------- many layer kinds


def kind(i: int) -> dict:
    """Layer kind i of many_kinds: its own MLP width, and every eighth its own key/value heads."""
    return {"d_ff": 1024 + 64 * i, **({"n_kv_heads": 4} if i % 8 == 0 else {})}


def many_kinds(count: int, prefix: tuple[str, ...] = (), depth: int | None = None) -> dict:
    """llama-3-8b's fields with `count` layer kinds: the `prefix`, then every kind once, repeated over
    `depth` layers (default: each kind once)."""
    data = archspec.preset("llama-3-8b").model_dump(mode="json", exclude_none=True)
    data["name"] = "many-kinds"
    data["kinds"] = {f"k{i}": kind(i) for i in range(count)}
    data["layers"] = {"prefix": list(prefix), "pattern": [f"k{i}" for i in range(count)]}
    data["decoder_layers"] = depth or len(prefix) + count
    return data


def alone(i: int, layers: int) -> archspec.ModelSpec:
    """llama-3-8b with kind i's fields on every one of `layers` layers: a spec without kinds."""
    data = archspec.preset("llama-3-8b").model_dump(mode="json", exclude_none=True)
    return build_spec({**data, **kind(i), "name": f"kind-{i}", "decoder_layers": layers})


def test_a_spec_at_the_kinds_limit_counts_as_its_kinds_counted_alone():
    """MAX_KINDS kinds after a prefix, repeated and cut short: parameters, FLOPs and the weights of the fullest
    of four pipeline stages equal the sums, layer by layer, of each kind's layer as a spec of one kind counts
    it (its one-layer spec less what every spec has besides its layers)."""
    from collections import Counter

    from archspec.core.limits import MAX_KINDS
    from archspec.plan.fit import fit
    from archspec.plan.inference import estimate_inference
    from archspec.plan.sweep import sweep_row

    prefix, depth = ("k3", "k0"), 2 + 2 * MAX_KINDS + 77
    spec = build_spec(many_kinds(MAX_KINDS, prefix, depth))
    walk = [*prefix, *[f"k{i}" for i in range(MAX_KINDS)] * 3][:depth]  # the kind of each layer
    counted = Counter(walk)
    assert len(spec.kinds) == MAX_KINDS and set(counted) == set(spec.kinds)

    def params(s):
        return archspec.count_params(s).total

    def flops(s):
        return archspec.count_flops(s, 1, 64).forward

    one, two = alone(0, 1), alone(0, 2)
    base = {f: 2 * f(one) - f(two) for f in (params, flops)}  # embeddings, final norm, head
    layer = {}
    for i in range(MAX_KINDS):
        single = alone(i, 1)
        layer[f"k{i}"] = {f: f(single) - base[f] for f in (params, flops)}
    for f in (params, flops):
        assert f(spec) == base[f] + sum(n * layer[k][f] for k, n in counted.items()), f.__name__

    # four pipeline stages of ceil(depth / 4) layers: the embeddings on the first, final norm and head on the last
    components = archspec.count_params(one).components
    k = -(-depth // 4)
    stages = [sum(layer[name][params] for name in walk[s * k : (s + 1) * k]) for s in range(4)]
    stages[0] += components["embed"]
    stages[-1] += base[params] - components["embed"]
    memory = archspec.estimate_memory(spec, 1, 64, pipeline_parallel=4)
    assert memory.inference_weights_bytes == 2 * max(stages)  # bf16
    assert memory.params == params(spec)

    # every planner answers, and agrees with the count
    assert estimate_inference(spec, "h100", prompt_len=16, gen_len=16).weights_bytes == 2 * params(spec)
    assert fit(spec, "h100", "bf16").devices > 1
    assert sweep_row(spec, 64)["total"] == params(spec)


@pytest.mark.parametrize("count", [385, 10**4, 10**6])
def test_a_spec_of_more_kinds_than_the_limit_is_refused_by_its_count(count):
    from archspec.core.limits import MAX_KINDS

    data = many_kinds(max(count, MAX_KINDS + 1)) if count <= 10**4 else {
        **many_kinds(1), "kinds": dict.fromkeys(map(str, range(count)), {})}  # fmt: skip
    count = len(data["kinds"])
    message = f"kinds: {count:,} layer kinds, more than the {MAX_KINDS:,} archspec plans"
    with pytest.raises(archspec.SpecError, match=message) as refusal:
        build_spec(data)
    assert "\n" not in str(refusal.value)
    with pytest.raises(archspec.SpecError, match=message):
        archspec.preset("llama-3-8b").replace(kinds=data["kinds"], layers=data["layers"])


def test_a_spec_file_of_more_kinds_than_the_limit_is_refused_in_one_line(tmp_path):
    from archspec.core.limits import MAX_KINDS

    path = tmp_path / "many.json"
    path.write_text(json.dumps(many_kinds(MAX_KINDS + 1)), encoding="utf-8")
    for command in (["params"], ["inference", "--gpu", "h100"], ["fit", "--gpu", "h100"]):
        refused(command[0], path, *command[1:], message=f"{MAX_KINDS + 1:,} layer kinds, more than the {MAX_KINDS:,}")
    assert archspec.count_params(build_spec(many_kinds(MAX_KINDS))).total > 0  # the limit itself is planned


def test_where_each_kind_sits_is_counted_as_walking_the_layers_does():
    """Placement's counts (by its index of each kind's runs and places in the pattern) against the layers
    written out one by one: random prefixes of runs, patterns and depths, every kind and range."""
    import random

    from archspec.spec.layers import Placement

    rng = random.Random(31)
    for _ in range(300):
        names = [f"k{i}" for i in range(rng.randint(1, 6))]
        runs = tuple((rng.choice(names), rng.randint(1, 4)) for _ in range(rng.randint(0, 4)))
        pattern = tuple(rng.choice(names) for _ in range(rng.randint(1, 7)))
        prefix = [k for k, n in runs for _ in range(n)]
        depth = len(prefix) + rng.randint(0, 30)
        layers = (prefix + list(pattern) * 31)[:depth]
        where = Placement(runs, pattern, depth)
        assert where.kinds() == list(dict.fromkeys(layers))
        for name in names:
            at = [i for i, k in enumerate(layers) if k == name]
            assert where.count(name) == len(at) and list(where.indices(name)) == at
            if at:
                assert where.first(name) == at[0]
            for _ in range(5):
                lo, hi = sorted(rng.randint(-2, depth + 2) for _ in range(2))
                mod = rng.choice([1, 1, 3])
                res = rng.randrange(mod)
                expected = sum(lo <= i < hi and i % mod == res for i in at)
                assert where.count_in(name, lo, hi, mod, res) == expected, (runs, pattern, depth, name, lo, hi, mod)
