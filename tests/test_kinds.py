"""Layer kinds: the [layers] pattern resolved once into a per-layer view, read by every quantity.

Each expected number here is written out independently of the code under test: a list comprehension
of the released rule (Gemma 3's `layer_types`), the arithmetic of one layer, or the same model
written the older way (`sliding_layers`, `dense_layers`)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

import archspec
from archspec.count.flops import count_flops
from archspec.count.params import count_params
from archspec.memory import estimate_memory, kv_cache_bytes
from archspec.spec.layers import compact, layer_groups, layer_kinds
from archspec.spec.model import ModelSpec

BASE = dict(vocab_size=1000, d_model=64, n_heads=4, n_kv_heads=2, max_positions=512, position="rotary",
            norm="rmsnorm", activation="swiglu", bias=False, d_ff=128)  # fmt: skip


def gemma3_like(layers: int) -> ModelSpec:
    return ModelSpec(
        name="g3",
        decoder_layers=layers,
        **BASE,
        kinds={"local": {"attention": {"sliding_window": 16}, "position": {"base": 1e4}},
               "global": {"position": {"base": 1e6}}},
        layers={"pattern": ["local"] * 5 + ["global"]},
    )  # fmt: skip


def test_a_repeating_unit_is_cut_at_the_end_of_the_stack():
    # transformers' Gemma3TextConfig: "sliding_attention" if (i + 1) % 6 else "full_attention"
    released = ["local" if (i + 1) % 6 else "global" for i in range(62)]
    spec = gemma3_like(62)
    assert [k for k, _ in layer_kinds(spec, 62)] == released
    groups = {g.kind: g for g in layer_groups(spec, 62)}
    assert groups["local"].count == released.count("local") == 52
    assert list(groups["global"].indices()) == [i for i, k in enumerate(released) if k == "global"]


def test_each_kind_sees_its_own_changes_and_the_model_defaults():
    spec = gemma3_like(12)
    local, glob = spec.kind_spec("local"), spec.kind_spec("global")
    assert local.attention.sliding_window == 16 and glob.attention.sliding_window is None
    assert local.position.base == 1e4 and glob.position.base == 1e6
    assert local.d_ff == glob.d_ff == 128 and local.n_kv_heads == 2


def test_the_older_sliding_layers_are_the_same_kinds_written_out():
    old = ModelSpec(name="old", decoder_layers=6, **BASE, attention={"sliding_window": 8, "sliding_layers": "even"})
    new = ModelSpec(name="new", decoder_layers=6, **BASE,
                    kinds={"sliding": {"attention": {"sliding_window": 8}}, "full": {}},
                    layers={"pattern": ["sliding", "full"]})  # fmt: skip
    assert count_params(old).total == count_params(new).total
    assert count_flops(old, seq_len=64).forward == count_flops(new, seq_len=64).forward
    for tokens in (5, 64):
        assert kv_cache_bytes(old, 2, tokens) == kv_cache_bytes(new, 2, tokens)
    assert [k for k, _ in layer_kinds(old, 6)] == ["sliding", "full"] * 3


def test_the_older_dense_layers_are_a_prefix_kind():
    moe = {"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 32}
    old = ModelSpec(name="old", decoder_layers=5, **BASE, mlp={**moe, "dense_layers": 2})
    new = ModelSpec(name="new", decoder_layers=5, **BASE, mlp=moe, kinds={"dense": {"mlp": "dense"}, "moe": {}},
                    layers={"prefix": ["dense", "dense"], "pattern": ["moe"]})  # fmt: skip
    a, b = count_params(old), count_params(new)
    assert (a.total, a.active, a.components) == (b.total, b.active, b.components)
    assert a.kinds["decoder"]["dense"]["layers"] == 2 and a.kinds["decoder"]["moe"]["layers"] == 3


def test_deepseek_v3_lists_its_three_dense_and_fifty_eight_moe_layers():
    kinds = count_params(archspec.preset("deepseek-v3")).kinds["decoder"]
    d, heads, q_rank, kv_rank, rope, nope, dv = 7168, 128, 1536, 512, 64, 128, 128
    attention = (d * q_rank + q_rank + q_rank * heads * (nope + rope) + d * (kv_rank + rope) + kv_rank
                 + kv_rank * heads * (nope + dv) + heads * dv * d)  # fmt: skip
    dense = attention + 3 * d * 18432 + 2 * d
    assert kinds["dense"] == {"layers": 3, "norm": 2 * d, "attention": attention, "mlp": 3 * d * 18432, "total": dense}
    assert kinds["moe"]["layers"] == 58
    assert kinds["moe"]["experts"] == 256 * 3 * d * 2048
    # the per-layer figure is the layer most of the stack has: an MoE layer, not the dense first one
    assert count_params(archspec.preset("deepseek-v3")).per_layer["decoder"]["total"] == kinds["moe"]["total"]


def test_a_window_keeps_the_window_less_one_keys_as_transformers_cache_does():
    spec = archspec.preset("mistral-7b")  # 32 layers, 8 key/value heads of 128, window 4096
    per_token = 32 * 8 * 128 * 2 * 2  # keys and values, bf16
    assert kv_cache_bytes(spec, 1, 32768) == per_token * 4095
    assert kv_cache_bytes(spec, 1, 1000) == per_token * 1000


def test_a_chunked_kind_caches_its_chunk_and_a_nope_kind_has_no_rotation():
    spec = ModelSpec(name="l4", decoder_layers=4, **BASE,
                     kinds={"chunked": {"attention": {"chunk": 32}}, "nope": {"position": "none"}},
                     layers={"pattern": ["chunked", "chunked", "chunked", "nope"]})  # fmt: skip
    per_layer_token = 2 * 16 * 2 * 2  # kv heads x d_head x (k, v) x bf16
    assert kv_cache_bytes(spec, 1, 100) == per_layer_token * (3 * 31 + 100)
    assert spec.kind_spec("nope").rotary_dims == 0 and spec.kind_spec("chunked").rotary_dims == 16


@pytest.mark.parametrize("quantity", ["params", "flops", "memory"])
def test_cost_follows_the_kinds_not_the_depth(quantity):
    """A quantity of an L-layer stack is a + b·L for L a multiple of the unit: two shallow stacks
    predict a million-layer one exactly (and it is computed over kinds, not layer by layer)."""

    def value(layers: int) -> int:
        spec = gemma3_like(layers)
        if quantity == "params":
            return count_params(spec).total
        if quantity == "flops":
            return count_flops(spec, seq_len=32).forward
        m = estimate_memory(spec, seq_len=32)
        return m.weights_bytes + m.activations_bytes + m.kv_cache_bytes

    v6, v12 = value(6), value(12)
    per_unit = v12 - v6
    assert value(10**6 - 4) == v6 + per_unit * (10**6 - 4 - 6) // 6


def test_compact_finds_the_shortest_prefix_and_unit():
    assert compact(["l"] * 5 + ["g"] + ["l"] * 5 + ["g"] + ["l"] * 2) == ([], ["l"] * 5 + ["g"])
    assert compact(["d", "d", "d"] + ["m"] * 58) == (["d", "d", "d"], ["m"])
    assert compact(["a", "b", "c"]) == ([], ["a", "b", "c"])


def test_compact_is_the_shortest_prefix_and_unit_by_search():
    """Against the definition, searched by brute force: the shortest prefix + unit whose unit repeated (cut
    short at the end) gives the rest, the shorter prefix first; every list of up to 9 layers of 2 kinds."""
    import itertools

    def searched(kinds):
        for size in range(1, len(kinds) + 1):
            for start in range(size):
                rest, unit = kinds[start:], kinds[start:size]
                if unit and all(rest[i] == unit[i % len(unit)] for i in range(len(rest))):
                    return kinds[:start], unit
        return [], []

    for n in range(10):
        for kinds in itertools.product("ab", repeat=n):
            assert compact(list(kinds)) == searched(list(kinds)), kinds


def test_show_writes_the_compact_pattern_and_it_loads_back(run_cli, tmp_path):
    spec = gemma3_like(62)
    path = tmp_path / "g3.json"
    path.write_text(json.dumps(spec.model_dump(exclude_unset=True)))
    code, out, err = run_cli("show", str(path), "--format", "json")
    assert code == 0, err
    (obj,) = json.loads(out)
    assert obj["layers"] == {"pattern": ["local"] * 5 + ["global"]}
    assert obj["kinds"]["global"] == {"position": {"base": 1e6}}
    back = ModelSpec.model_validate({k: v for k, v in obj.items() if k != "kind"})
    assert count_params(back).kinds == count_params(spec).kinds


def test_params_lists_the_kinds_of_a_heterogeneous_stack(run_cli):
    code, out, _ = run_cli("params", "deepseek-v3")
    assert code == 0
    assert "layers by kind: decoder: 3 x dense 583.5M (583,483,392), 58 x moe 11.5B (11,507,286,016)" in out


BAD = [
    ({"kinds": {"a": {}}}, "kinds are placed by [layers]"),
    ({"kinds": {"a": {}}, "layers": {"pattern": ["b"]}}, "layers names kind 'b', which is not one of the kinds (a)"),
    ({"kinds": {"a": {}, "b": {}}, "layers": {"pattern": ["a"]}}, "kinds.b is never used"),
    ({"kinds": {"a": {}}, "layers": {"pattern": ["a"] * 5}}, "more than decoder_layers=4"),
    ({"kinds": {"a": {"attention": {"sliding_window": 0}}}, "layers": {"pattern": ["a"]}}, "kinds.a:"),
    ({"kinds": {"a": {"colour": 1}}, "layers": {"pattern": ["a"]}}, "colour"),
    ({"kinds": {"A b": {}}, "layers": {"pattern": ["A b"]}}, "kind name 'A b'"),
    ({"kinds": {"a": {}}, "layers": {"pattern": ["a"]}, "attention": {"sliding_window": 4, "sliding_layers": "odd"}},
     "give the window to a kind"),
    ({"kinds": {"a": {"position": "alibi"}}, "layers": {"pattern": ["a"]}}, "rotary options or 'none'"),
    ({"layers": {"pattern": []}}, "layers.pattern"),
]  # fmt: skip


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_kinds_are_one_line_naming_the_problem(change, message, run_cli, tmp_path):
    data = {"name": "bad", "decoder_layers": 4, **BASE, **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, out, err = run_cli("params", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_decode_reads_the_windowed_cache_step_by_step():
    from archspec.plan.inference import estimate_inference

    spec = archspec.preset("mistral-7b")
    est = estimate_inference(spec, "h200", batch=1, prompt_len=4000, gen_len=200)
    per_token = 32 * 8 * 128 * 2 * 2
    steps = [min(t, 4095) * per_token for t in range(4000, 4200)]  # the window fills during decoding
    assert est.decode_kv_bytes_per_token == Fraction(sum(steps), len(steps))


def test_moe_decode_reads_only_the_moe_kinds_experts():
    from archspec.plan.inference import estimate_inference

    moe = {"kind": "moe", "experts": 8, "top_k": 2, "d_expert": 64}
    spec = ModelSpec(name="l4", decoder_layers=4, **BASE, kinds={"dense": {"mlp": "dense"}, "moe": {"mlp": moe}},
                     layers={"pattern": ["dense", "moe"]})  # fmt: skip
    dense_twin = spec.replace(kinds={"dense": {"mlp": "dense"}, "moe": {"mlp": "dense"}})
    one, eight = (estimate_inference(spec, "h200", batch=b, prompt_len=8, gen_len=4) for b in (1, 8))
    experts = 2 * 8 * 3 * 64 * 64 * 2  # two MoE layers of 8 experts (gate, up, down), bf16
    always = one.decode_weights_bytes - Fraction(experts * 2, 8)  # batch 1 reads 2 of 8 experts
    assert eight.decode_weights_bytes == always + experts * (1 - (1 - Fraction(2, 8)) ** 8)
    assert estimate_inference(dense_twin, "h200", batch=1, prompt_len=8, gen_len=4).expected_experts is None


# ---------------------------------------------------------------- fuzzed patterns: a count or one line


def _cli(*argv: str) -> tuple[int, str, str]:
    """The command line in this process; any exception but SystemExit escapes (a traceback for the user)."""
    import contextlib
    import io

    from archspec.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NAMES = st.sampled_from(["a", "b", "local", "global", "Bad Name", "", "moe"])
OVERRIDE = st.one_of(
    st.fixed_dictionaries({}, optional={
        "attention": st.one_of(st.sampled_from(["standard", "none", "mamba2", "latent", 7]),
                               st.fixed_dictionaries({}, optional={"sliding_window": st.integers(-2, 40),
                                                                   "chunk": st.integers(0, 40),
                                                                   "qk_norm": st.sampled_from([True, "l2", "x"]),
                                                                   "sinks": st.booleans(), "colour": st.just(1)})),
        "mlp": st.one_of(st.sampled_from(["dense", "none", "moe"]),
                         st.just({"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 16})),
        "position": st.sampled_from(["none", "alibi", {"base": 1e4}, {"base": -1}]),
        "n_kv_heads": st.integers(0, 5),
        "d_ff": st.integers(-1, 64),
    }),
    st.just("dense"),
)  # fmt: skip


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    kinds=st.dictionaries(NAMES, OVERRIDE, max_size=3),
    prefix=st.lists(NAMES, max_size=3),
    pattern=st.lists(NAMES, max_size=5),
    depth=st.integers(1, 6),
    with_layers=st.booleans(),
)
def test_fuzzed_kinds_count_exactly_or_fail_in_one_line(kinds, prefix, pattern, depth, with_layers, tmp_path_factory):
    data = {"name": "fuzz", "decoder_layers": depth, **BASE, "kinds": kinds}
    if with_layers:
        data["layers"] = {"prefix": prefix, "pattern": pattern}
    path = tmp_path_factory.mktemp("kinds") / "spec.json"
    path.write_text(json.dumps(data))
    code, out, err = _cli("params", str(path), "--format", "json")
    if code != 0:
        assert code == 2 and out == "" and err.startswith("archspec: error: ") and err.count("\n") == 1, err
        return
    (obj,) = json.loads(out)
    spec = archspec.load_spec(path)
    # the kinds' layers add up to the stack, and the total is the sum over the per-layer view
    per_layer = [k for k, _ in layer_kinds(spec, depth)]
    kinds_out = obj["kinds"]["decoder"]
    assert sum(k["layers"] for k in kinds_out.values()) == depth
    assert {name: k["layers"] for name, k in kinds_out.items()} == {k: per_layer.count(k) for k in set(per_layer)}
    outside = obj["total"] - sum(k["layers"] * k["total"] for k in kinds_out.values())
    assert (
        outside
        == count_params(spec.replace(decoder_layers=1, kinds={}, layers=None)).total
        - count_params(spec.replace(decoder_layers=1, kinds={}, layers=None)).kinds["decoder"]["layer"]["total"]
    )


@pytest.mark.parametrize("name", [n for n in archspec.presets() if archspec.preset(n).kinds])
def test_a_kind_spec_is_its_data_validated_as_a_spec(name):
    """kind_spec holds the data _check_kinds validated; validating it again gives the same spec, field for field."""
    spec = archspec.preset(name)
    for kind in spec.kinds:
        validated = ModelSpec.model_validate(spec._kind_data(kind))
        assert spec.kind_spec(kind) == validated and spec.kind_spec(kind).model_dump() == validated.model_dump()
        assert spec.kind_spec(kind).model_fields_set == validated.model_fields_set
