"""`archspec formula`: polynomials traced through the description, proven against the counters."""

import json
import random
import subprocess
import sys

import pytest
from matrix import fast_only

import archspec
from archspec.count.flops import count_flops
from archspec.count.formula import NotDerived, derive, field_value, prove, traced_spec
from archspec.count.params import count_params

sympy = pytest.importorskip("sympy")

ALL = archspec.presets()
# the fast set: a plain stack, an encoder-decoder, grouped queries, MoE with latent attention, a pattern of
# local and global layers, a hybrid with Mamba layers; every preset in the full run
FAST = {"gpt2", "t5-base", "llama-3-8b", "deepseek-v3", "gemma-3-1b", "jamba-1.5-large"}


def test_gpt2_is_the_seed_formula_with_its_exact_small_terms(run_cli):
    code, out, _ = run_cli("formula", "gpt2")
    assert code == 0
    assert "parameters = 12·L·d² + 13·L·d + V·d + T·d + 2·d" in out.splitlines()
    assert "forward FLOPs per token = 24·L·d² + 4·L·T·d + 2·V·d" in out.splitlines()


def test_gpt2s_formula_is_its_layout_by_hand():
    """12·L·d² + 13·L·d + V·d + T·d + 2·d, written out from GPT-2's modules: per layer two LayerNorms (4d),
    QKV (3d² + 3d), the output projection (d² + d), the MLP (4d² + 4d and 4d² + d); the token and
    position tables; the final LayerNorm."""
    f = derive(archspec.preset("gpt2"))
    L, d, V, T = sympy.symbols("L d V T", positive=True, integer=True)
    by_hand = L * (4 * d + 3 * d * d + 3 * d + d * d + d + 4 * d * d + 4 * d + 4 * d * d + d) + V * d + T * d + 2 * d
    got = f.params.expr.subs({s: sympy.Symbol(str(s), positive=True, integer=True) for s in f.params.expr.free_symbols})
    assert sympy.expand(got - by_hand) == 0


def test_llama_shows_its_swiglu_and_grouped_query_terms():
    f = derive(archspec.preset("llama-3-8b"))
    terms = [t.term for t in f.params.terms]
    assert "3·L·d·f" in terms  # SwiGLU: gate, up and down, each d x f
    assert "2·L·d²·h_kv/h" in terms  # keys and values: n_kv_heads heads of d_head = d / h
    assert "2·L·d²" in terms  # queries and the output projection
    assert sum(t.value for t in f.params.terms) == count_params(archspec.preset("llama-3-8b")).total


def _evaluate(expr, spec):
    """The polynomial at a spec: each symbol's field read from the spec."""
    fields = {str(s): s for s in expr.free_symbols}
    _, symbols = traced_spec(spec)
    return expr.subs({fields[str(sym)]: field_value(spec, f) for f, sym in symbols.items() if str(sym) in fields})


@pytest.mark.parametrize("name", fast_only(ALL, FAST))
def test_every_presets_formula_equals_the_counters_at_new_random_points(name):
    """Proven inside derive; proven again here at points drawn by another rule: each field alone
    moved by a small amount (layers by whole periods of the layer pattern), the spec validated anew."""
    spec = archspec.preset(name)
    f = derive(spec)
    assert f.params.value == count_params(spec).total
    assert _evaluate(f.flops_per_token.expr, spec) * spec.max_positions == count_flops(spec, 1, None).forward
    from archspec.count.formula import period, traced_fields

    rng = random.Random(name)
    checked = 0
    for field in traced_fields(spec):
        step = period(spec) if field.endswith("_layers") else field_value(spec, field)  # keeps every divisibility
        try:
            moved = spec.replace(**{field: field_value(spec, field) + step * rng.randint(1, 2)})
        except archspec.SpecError:
            continue
        assert _evaluate(f.params.expr, moved) == count_params(moved).total, (name, field)
        assert _evaluate(f.flops_per_token.expr, moved) * moved.max_positions == count_flops(moved, 1, None).forward
        checked += 1
    assert checked >= 2


def test_a_wrong_polynomial_is_refused_by_the_proof():
    spec = archspec.preset("gpt2")
    f = derive(spec)
    _, symbols = traced_spec(spec)
    with pytest.raises(NotDerived, match="parameter count differs"):
        prove(spec, symbols, f.params.expr + symbols["d_model"], f.flops_per_token.expr)


def test_json_has_the_polynomials_as_text_and_their_terms(run_cli):
    code, out, _ = run_cli("formula", "gpt2", "llama-3-8b", "--format", "json")
    objs = json.loads(out)
    assert code == 0 and [o["name"] for o in objs] == ["gpt2", "llama-3-8b"]
    gpt2 = objs[0]
    assert gpt2["params"]["polynomial"] == "12·L·d² + 13·L·d + V·d + T·d + 2·d"
    assert [t["term"] for t in gpt2["params"]["terms"]] == ["12·L·d²", "13·L·d", "V·d", "T·d", "2·d"]
    assert [t["value"] for t in gpt2["params"]["terms"]] == [12 * 12 * 768**2, 13 * 12 * 768, 50257 * 768,
                                                              1024 * 768, 2 * 768]  # fmt: skip
    assert gpt2["params"]["value"] == 124_439_808 and gpt2["symbols"]["V"] == {"field": "vocab_size", "value": 50257}


def test_without_sympy_the_command_names_the_extra(run_cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "sympy", None)  # import sympy raises ImportError
    code, out, err = run_cli("formula", "gpt2")
    assert code == 2 and out == "" and err.count("\n") == 1 and "[formula]" in err


def test_sympy_is_imported_by_formula_alone(tmp_path):
    code = "import sys; from archspec.cli import main; main(['params', 'gpt2']); main(['validate', 'gpt2']); " \
           "print('sympy' in sys.modules)"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"


def test_traced_and_plain_specs_never_share_the_layer_cache():
    """archspec.describe.blocks keeps each layer kind's parts by field values; a traced int equal to a plain one
    must not be handed the plain parts (constants where the symbols are), nor leave traced parts behind."""
    spec = archspec.preset("gpt3-xl")
    count_params(spec.replace(d_head=64))  # fills the cache for another shape first
    plain = count_params(spec).total  # and for this one
    f = derive(spec)
    assert [t.term for t in f.params.terms][:2] == ["4·L·d·h·d_h", "8·L·d²"]
    assert type(count_params(spec).total) is int and count_params(spec).total == plain


def test_a_mixture_of_experts_shows_its_experts_and_the_ones_a_token_uses():
    """Mixtral: E SwiGLU experts of width f_e per layer in the count, k of them in the FLOPs, and a router
    of E x d; the fields of the MLP's sub-table traced as the model's own are."""
    f = derive(archspec.preset("mixtral-8x7b"))
    assert "3·L·E·d·f_e" in [t.term for t in f.params.terms] and "L·E·d" in [t.term for t in f.params.terms]
    assert "6·L·k·d·f_e" in [t.term for t in f.flops_per_token.terms]
    assert f.symbols["E"] == {"field": "mlp.experts", "value": 8} and f.symbols["k"]["field"] == "mlp.top_k"


def test_a_description_that_cannot_be_traced_is_said_on_stderr_and_exits_1(run_cli, monkeypatch):
    import archspec.count.formula as formula

    def refuse(spec, nested):
        raise NotDerived(f"{spec.name}: refused for the test")

    monkeypatch.setattr(formula, "_derive", refuse)
    code, out, err = run_cli("formula", "gpt2", "--format", "json")
    assert code == 1 and json.loads(out) == [] and err == "archspec: formula: gpt2: refused for the test\n"
